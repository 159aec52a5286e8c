"""The simulator's failure scenarios: exact formats, signals that follow onset and seed, what the
monitor makes of them, and the `rlagent simulate` command (offline; live mode is in
test_simulator_live.py)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from rlagent.commands.simulate import simulate
from rlagent.evals.simulator import SCENARIOS, write_run
from rlagent.evals.simulator.expectations import ALL_IDS, EXPECTATIONS
from rlagent.evals.simulator.frameworks import FRAMEWORK_SCENARIOS
from rlagent.evals.simulator.scenario import KINDS
from rlagent.evals.simulator.verify import check_in_process
from rlagent.tools.patterns import classify

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LOGURU = re.compile(r"^(?:\[trainer0\]:)?\d\d:\d\d:\d\d +(DEBUG|INFO|SUCCESS|WARNING|ERROR) (.*)$")
STEP = re.compile(r"(?:SUCCESS) Step (\d+) \|")

# Scenarios the current rules mis-diagnose although the run is realistic: strict xfails, so a
# fixed rule turns them into failures that ask for the entry to be removed.
RULE_ISSUES: dict[str, str] = {}


def text(path: Path) -> str:
    return ANSI.sub("", path.read_text())


def lines_of(path: Path) -> list[str]:
    return text(path).splitlines()


def steps_in(path: Path) -> list[int]:
    return [int(m.group(1)) for line in lines_of(path) if (m := STEP.search(line))]


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def small(name: str, **changes: object):
    return SCENARIOS[name].variant(**{"batch_size": 32, "group_size": 8, "eval_examples": 8, **changes})


# ---- the registry and its expectations ---------------------------------------------------------


def test_every_kind_has_a_scenario_and_an_expectation():
    assert set(EXPECTATIONS) == set(KINDS)
    assert {sc.kind for sc in SCENARIOS.values()} == set(KINDS)
    assert {sc.layout for sc in SCENARIOS.values() if sc.kind == "truncation"} == {"H", "L"}
    assert all(sc.description for sc in SCENARIOS.values())


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_expectations_partition_the_finding_ids(name):
    sc = SCENARIOS[name]
    expects, tolerates, forbids = set(sc.expects), set(sc.tolerates), set(sc.forbids)
    assert expects | tolerates | forbids == set(ALL_IDS)
    assert not (expects & tolerates) and not (expects & forbids) and not (tolerates & forbids)
    if sc.kind == "healthy":
        assert sc.signal_step is None and sc.expected_health == "Healthy"
        assert expects <= {"run_finished"} and tolerates <= {"reward_flat"}
    else:
        assert expects, "a failure scenario must be long enough past its onset to be diagnosable"
        assert sc.signal_step is not None and sc.signal_step >= sc.onset_step


def test_signal_step_and_expects_follow_the_parameters():
    sc = SCENARIOS["mismatch-kl-h"]
    assert sc.variant(onset_step=12).signal_step == 12
    assert sc.variant(onset_step=sc.steps - 2).expects == []  # too close to the end to be sustained
    assert "mismatch_kl_growth" in sc.variant(onset_step=sc.steps - 2).tolerates
    assert sc.variant(layout="L").expects == ["mismatch_kl_growth"]
    assert SCENARIOS["kl-blowup-h"].variant(layout="L").expects == []  # ref_kl lives in metrics.jsonl
    assert SCENARIOS["checkpoint-failure-h"].variant(onset_step=21).signal_step == 30  # the next checkpoint
    crash = SCENARIOS["crash-oom-h"]
    assert crash.variant(onset_step=crash.steps + 1).expects == []
    assert crash.variant(attempt=2, resume_step=20).expects == []  # a resume gets past the crash


# ---- the monitor's diagnosis ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_monitor_reports_what_the_scenario_expects(name, tmp_path, request):
    if name in RULE_ISSUES:
        request.applymarker(pytest.mark.xfail(reason=RULE_ISSUES[name], strict=True))
    sc = SCENARIOS[name].variant(seed=7)
    report = check_in_process(write_run(sc, tmp_path / "run"), tmp_path / "home")
    found = {f["id"] for f in report["findings"]}
    assert set(sc.expects) <= found, report["findings"]
    assert not found & set(sc.forbids), report["findings"]
    assert report["health"] == sc.expected_health


# ---- formats of the failures --------------------------------------------------------------------


def test_nccl_timeout_is_cpp_lines_then_sigabrt_child_failed(tmp_path):
    run = write_run(small("crash-nccl-h", steps=20, onset_step=9), tmp_path / "run")
    log = lines_of(run / "logs/latest/trainer.log")
    watchdog = next(i for i, line in enumerate(log) if "Watchdog caught collective operation timeout" in line)
    assert re.match(r"^\[trainer0\]:\[rank0\]:\[E\d{4} \d\d:\d\d:\d\d\.\d{9} ProcessGroupNCCL\.cpp:\d+\] ", log[watchdog])
    assert not LOGURU.match(log[watchdog])  # C++: no loguru head
    assert any(
        line.startswith("[trainer0]:terminate called after throwing an instance of 'c10::DistBackendError'") for line in log
    )
    tail = "\n".join(log[watchdog:])
    assert "torch.distributed.elastic.multiprocessing.errors.ChildFailedError" in tail
    assert "  exitcode  : -6 (pid: " in tail and "traceback : Signal 6 (SIGABRT) received by PID" in tail
    assert max(steps_in(run / "logs/latest/trainer.log")) == 8
    # the trainer hung for the 600 s timeout: the orchestrator paused meanwhile
    orch = text(run / "logs/latest/orchestrator.log")
    assert "Orchestrator paused: waiting for trainer to broadcast checkpoint 8" in orch
    assert classify(log[watchdog].removeprefix("[trainer0]:"), "STDERR")[0] == "nccl"


def test_host_oom_is_exit_minus_nine_in_the_slurm_job_log(tmp_path):
    run = write_run(small("host-oom-h", steps=20, onset_step=12), tmp_path / "run")
    (job,) = run.glob("job_*.log")
    log = lines_of(job)
    errors = [m.group(2) for line in log if (m := LOGURU.match(line)) and m.group(1) == "ERROR"]
    assert errors == ["Error: Trainer failed with exit code -9", "Terminating all processes..."]
    assert log[-1].startswith("slurmstepd: error: Detected 1 oom_kill event in StepId=")
    assert any("SUCCESS Step 3 |" in line for line in log)  # the launcher's tail -F of orchestrator.log
    assert (run / "rl.sbatch").read_text().startswith("#!/bin/bash\n#SBATCH")
    assert json.loads((run / "configs/rl.json").read_text())["run"]["name"] == small("host-oom-h").run_name
    trainer = text(run / "logs/latest/trainer.log")
    assert "Traceback" not in trainer and "ChildFailedError" not in trainer  # SIGKILL: no goodbye
    assert max(steps_in(run / "logs/latest/trainer.log")) == 11


def test_python_crash_and_inference_abort_are_orchestrator_fatal_errors(tmp_path):
    run = write_run(small("crash-python-h", steps=20, onset_step=10), tmp_path / "py")
    orch = text(run / "logs/latest/orchestrator.log")
    assert "ERROR Fatal error in run_orchestrator" in orch and orch.rstrip().endswith("KeyError: 'answer'")
    run = write_run(small("inference-unreachable-h", steps=20, onset_step=8), tmp_path / "inf")
    log = lines_of(run / "logs/latest/orchestrator.log")
    first_step = next(i for i, line in enumerate(log) if "SUCCESS Step 1 |" in line)
    late = [line for line in log[first_step:] if "Inference server was not reached after" in line]
    assert len(late) == 179 and late[-1].split("after ")[1].startswith("1790 seconds")
    assert any(line.endswith("ERROR Inference server is not ready after 1800 seconds. Aborting...") for line in log)
    assert "EngineDeadError" in text(run / "logs/latest/inference.log")


def test_checkpoint_failure_leaves_step_dirs_without_metadata(tmp_path):
    sc = small("checkpoint-failure-h", steps=34, onset_step=15)
    run = write_run(sc, tmp_path / "run")
    assert (run / "checkpoints/step_10/trainer/.metadata").is_file()
    for step in (20, 30):
        assert (run / f"checkpoints/step_{step}/trainer/__0_0.distcp").is_file()
        assert not (run / f"checkpoints/step_{step}/trainer/.metadata").exists()
        assert (run / f"checkpoints/step_{step}/orchestrator/progress.pt").is_file()
    # prime-rl has no save-error message: the missing .metadata is the only witness
    assert not [line for line in lines_of(run / "logs/latest/trainer.log") if " ERROR " in line]
    assert max(steps_in(run / "logs/latest/trainer.log")) == 34


def test_metrics_only_failures_land_in_metrics_jsonl(tmp_path):
    run = write_run(small("disk-low-h", steps=30, onset_step=18), tmp_path / "disk")
    disk = {r["step"]: r["system/ckpt_disk_free_ratio"] for r in rows(run) if "system/ckpt_disk_free_ratio" in r}
    assert disk[17] > 0.2 and disk[30] < 0.10
    run = write_run(small("kl-blowup-h", steps=30, onset_step=16), tmp_path / "kl")
    ref = {r["step"]: r["ref_kl/mean"] for r in rows(run) if "ref_kl/mean" in r}
    assert set(ref) == set(range(1, 31)) and ref[15] < 0.1 and ref[30] > 10
    run = write_run(small("orchestrator-bottleneck-h", steps=30, onset_step=15), tmp_path / "bn")
    share = {r["step"]: r["time/wait_for_batch"] / r["time/step"] for r in rows(run) if "time/wait_for_batch" in r}
    assert max(share[n] for n in range(11, 15)) < 0.3 < 0.5 < min(share[n] for n in range(18, 31))


def test_warning_lines_follow_the_formats_doc(tmp_path):
    run = write_run(small("empty-batches-h", steps=25, onset_step=18), tmp_path / "eb")
    empty = [line for line in lines_of(run / "logs/latest/orchestrator.log") if "empty train batch" in line]
    assert empty and all(
        re.search(r"WARNING Step \d+: empty train batch after \d+ finalized episodes \(consecutive empty batches: \d+/10\)$", e)
        for e in empty
    )
    assert min(int(re.search(r"Step (\d+):", e).group(1)) for e in empty) == 18
    run = write_run(small("off-policy-drops-h", steps=30, onset_step=18), tmp_path / "op")
    drops = [line for line in lines_of(run / "logs/latest/orchestrator.log") if "train episodes past" in line]
    assert len(drops) >= 5 and all(
        re.search(
            r"WARNING Cancelled \d+ train episodes past max_off_policy_steps=8\. Consider increasing it to avoid this\.$", d
        )
        for d in drops
    )
    run = write_run(small("reward-constant-h", steps=25, onset_step=15), tmp_path / "rc")
    few = [line for line in lines_of(run / "logs/latest/orchestrator.log") if "effective traces are trainable" in line]
    assert len(few) >= 11 and few[0].endswith(
        "Only 0/32 effective traces are trainable (0.0%) — consider reviewing task difficulty"
    )


def test_a_stall_keeps_the_pipeline_view_going_without_steps(tmp_path):
    sc = small("stall-h", steps=30, onset_step=12)
    run = write_run(sc, tmp_path / "run")
    assert max(steps_in(run / "logs/latest/trainer.log")) == 11
    orch = lines_of(run / "logs/latest/orchestrator.log")
    last_step = max(i for i, line in enumerate(orch) if STEP.search(line))
    pipeline_after = [line for line in orch[last_step:] if "Train batch" in line]
    assert len(pipeline_after) > 60  # > 10 min of the 10 s pipeline view
    newest = max(p.stat().st_mtime for p in run.rglob("*.log"))
    trainer = (run / "logs/latest/trainer.log").stat().st_mtime
    assert newest - trainer > 15 * 60


@pytest.mark.parametrize(("name", "metric"), [("mismatch-kl-h", "Mismatch KL"), ("entropy-explosion-h", "Entropy")])
def test_failure_moves_with_onset_and_severity(name, metric, tmp_path):
    def series(**changes):
        run = write_run(small(name, steps=36, **changes), tmp_path / f"{name}{sorted(changes.items())}")
        out = {}
        for line in lines_of(run / "logs/latest/trainer.log"):
            m = re.search(rf"Step (\d+) \|.*\| {metric} ([\d.]+)", line)
            if m:
                out[int(m.group(1))] = float(m.group(2))
        return out

    early, late, mild = series(onset_step=14), series(onset_step=24), series(onset_step=14, severity=0.4)
    base = sorted(early[n] for n in range(2, 10))[4]
    assert early[13] < 2 * base < 3 * base < early[36]
    assert late[23] < 2 * base and late[36] > 2 * base
    assert mild[36] < early[36]


def test_same_seed_same_bytes_for_failure_scenarios(tmp_path):
    def snapshot(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    for name in ("host-oom-h", "crash-nccl-h", "inference-unreachable-h"):
        sc = small(name, steps=14, onset_step=8)
        a, b = snapshot(write_run(sc, tmp_path / f"{name}a")), snapshot(write_run(sc, tmp_path / f"{name}b"))
        c = snapshot(write_run(sc.variant(seed=99), tmp_path / f"{name}c"))
        assert a == b
        assert a["logs/attempt_1/orchestrator.log"] != c["logs/attempt_1/orchestrator.log"]


# ---- the command ----------------------------------------------------------------------------------


@pytest.fixture
def cli():
    app = typer.Typer()
    app.command()(simulate)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args])


def test_list_names_every_scenario(cli):
    result = cli("--list")
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.output.splitlines()]
    assert listed == list(SCENARIOS) + list(FRAMEWORK_SCENARIOS)  # prime-rl, then the SIMULATED verl/TRL/OpenRLHF runs


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-scenario", "OUT"], "unknown scenario 'no-such-scenario'"),
        (["healthy-h", "OUT", "--severity", "-1"], "severity must be positive"),
        (["healthy-h", "OUT", "--onset", "0"], "onset_step must be >= 1"),
        (["healthy-h", "OUT", "--live", "--speed", "0"], "--speed must be positive"),
        (["healthy-h", "OUT", "--layout", "X"], "--layout must be H or L"),
        (["healthy-l", "OUT", "--resume.step", "10"], "do not exist in layout L"),
        (["healthy-h", "OUT", "--ckpt.resume-step", "10"], "does not exist in layout H"),
        (["healthy-h", "OUT", "--resume"], "no such run to resume"),
    ],
)
def test_errors_are_one_line_and_exit_2(cli, tmp_path, args, message):
    result = cli(*[str(tmp_path / a) if a == "OUT" else a for a in args])
    assert result.exit_code == 2
    assert message in result.output


def test_writes_then_refuses_then_resumes(cli, tmp_path):
    out = tmp_path / "run"
    first = cli("crash-oom-h", out, "--seed", "3", "--steps", "30", "--onset", "17", "--step-time", "20")
    assert first.exit_code == 0, first.output
    assert "run_crashed, cuda_oom" in first.output and "signal from step 17" in first.output
    assert max(steps_in(out / "logs/latest/trainer.log")) == 16
    again = cli("crash-oom-h", out)
    assert again.exit_code == 2 and "is not empty" in again.output
    missing = cli("crash-oom-h", out, "--resume.step", "15")
    assert missing.exit_code == 2 and "no complete checkpoint for step 15" in missing.output
    resumed = cli("crash-oom-h", out, "--resume")  # the newest complete checkpoint: step 10
    assert resumed.exit_code == 0, resumed.output
    assert os.readlink(out / "logs/latest") == "attempt_2"
    log = text(out / "logs/attempt_2/trainer.log")
    assert "Resuming training from checkpoint step 10" in log and "Starting from step 11 (total_tokens=" in log
    assert min(steps_in(out / "logs/attempt_2/trainer.log")) == 11 and max(steps_in(out / "logs/attempt_2/trainer.log")) == 30
    assert "Resuming orchestrator from checkpoint step 10" in text(out / "logs/attempt_2/orchestrator.log")
    assert json.loads((out / "configs/trainer.json").read_text())["resume"]["step"] == 10
    overwritten = cli("healthy-l", out, "--overwrite", "--steps", "12")
    assert overwritten.exit_code == 0 and not (out / "logs/attempt_1").exists()
