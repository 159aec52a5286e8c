"""The SIMULATED verl, TRL and OpenRLHF runs are in those frameworks' formats: every metrics line the simulator
writes parses with rlagent.tools.frameworks to the values it meant, in every console style; crash output is
recognised by the framework signatures; the layouts are detected; runs are deterministic; the command writes,
refuses and resumes runs with each framework's own resume flag."""

from __future__ import annotations

import itertools
import math
import os
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from rlagent.commands.simulate import simulate
from rlagent.evals.simulator.frameworks import FRAMEWORK_SCENARIOS, FrameworkScenario, plan_for, write_framework_run
from rlagent.evals.simulator.frameworks import trl as sim_trl
from rlagent.evals.simulator.frameworks import verl as sim_verl
from rlagent.evals.simulator.frameworks.common import Growth, tqdm_meter
from rlagent.evals.simulator.frameworks.scenario import EXPECTATIONS
from rlagent.evals.simulator.frameworks.writer import next_attempt, resume_point
from rlagent.tools.frameworks import detect, lines, openrlhf, signatures, trl, verl
from rlagent.tools.frameworks.pydict import parse_py_dict
from rlagent.tools.layout import RunNotFound, discover_run


def small(name: str, **changes: object) -> FrameworkScenario:
    return FRAMEWORK_SCENARIOS[name].variant(**{"samples_kept": 2, **changes})


def same(a: float | None, b: float, rel: float = 0.0, abs_: float = 0.0) -> bool:
    a = math.nan if a is None else float(a)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def assert_rows(parsed: list, intended: list, rel: float = 0.0, abs_: float = 0.0) -> None:
    assert [(r.step, r.kind) for r in parsed] == [(n, kind) for n, kind, _ in intended]
    for row, (n, _, values) in zip(parsed, intended, strict=True):
        assert set(row.values) == set(values), f"step {n}: keys differ"
        wrong = {k: (row.values[k], v) for k, v in values.items() if not same(v, row.values[k], rel, abs_)}
        assert not wrong, f"step {n}: {wrong}"


# ---- verl ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["v0.4", "v0.5-numpy1", "v0.7-numpy2"])
def test_every_verl_step_line_parses_to_the_values_meant(tmp_path, style):
    sc = small("verl-kl-blowup", style=style, steps=26, glued_tqdm=style == "v0.4", ansi=style != "v0.4")
    _, plan = write_framework_run(sc, tmp_path)
    text = lines.read_text(tmp_path / sim_verl.LOG)
    parsed = [row for row in map(lambda ln: verl.parse_step_line(ln.text, ln.lineno), lines.iter_lines(text)) if row]
    if style == "v0.4":
        assert_rows(parsed, plan.rows, abs_=0.0005 + 1e-9)  # `f"{v:.3f}"`
        assert "np.float64(" not in text and ":0.000 - " in text
    else:
        assert_rows(parsed, plan.rows)  # repr: exact
        assert ("np.float64(" in text) == (style == "v0.7-numpy2")
    assert parsed[0].step == 0 and parsed[0].kind == "val"  # val_before_train logs validation at step:0
    # the file logger has the same rows (orjson: NaN as null, read back as nan)
    logged = verl.read_file_logger(tmp_path / sim_verl.file_logger_path(sc)).rows
    assert_rows(logged, plan.rows)


def test_verl_console_carries_ray_prefixes_ansi_dedup_and_glued_tqdm(tmp_path):
    sc = small("verl-healthy", steps=12)
    write_framework_run(sc, tmp_path / "a")
    text = lines.read_text(tmp_path / "a" / sim_verl.LOG)
    assert "\x1b[2m\x1b[36m(TaskRunner pid=" in text and "(WorkerDict pid=" in text
    assert "[repeated 3x across cluster]" in text and "Ray deduplicates logs by default" in text
    assert "Training from scratch" in text and "Training Progress:" in text and "Initial validation metrics" in text
    old = small("verl-healthy-v04")
    write_framework_run(old, tmp_path / "b")
    raw = lines.read_text(tmp_path / "b" / sim_verl.LOG)
    assert "\x1b[" not in raw and "s/it]step:" in raw and "Final validation metrics" in raw
    assert "\r" in raw


def test_verl_checkpoints_dumps_and_hydra_files(tmp_path):
    sc = small("verl-degenerate-output", steps=22, samples_kept=3)
    write_framework_run(sc, tmp_path)
    found = verl.checkpoints(tmp_path / sim_verl.ckpt_dir(sc))
    assert found.steps == [10, 20] and found.latest == 20 and not found.notes
    dumps = verl.rollout_files(tmp_path / "rollouts")
    assert sorted(dumps) == [20, 21, 22]
    outputs = [s.output for s in verl.read_rollouts(dumps[22]).rows]
    assert len(outputs) == sc.batch and any(o.startswith("!!!!") for o in outputs)
    assert next(tmp_path.glob("outputs/*/*/.hydra/config.yaml")).read_text().startswith("# SIMULATED")
    assert "trainer.resume_mode" not in (tmp_path / sim_verl.SCRIPT).read_text()


# ---- TRL -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("style", "logging_steps"), [("tf4", 1), ("tf5", 1), ("tf5", 2)])
def test_every_trl_log_dict_parses_to_the_values_meant(tmp_path, style, logging_steps):
    sc = small("trl-nan", style=style, logging_steps=logging_steps, steps=28)
    _, plan = write_framework_run(sc, tmp_path)
    text = lines.read_text(tmp_path / sim_trl.LOG)
    rows = trl.assign_steps(trl.parse_console(text), logging_steps)
    rel = 5e-4 if style == "tf5" else 0.0  # `.4g` strings
    assert_rows(rows, plan.rows, rel=rel, abs_=1e-12 if style == "tf5" else 0.0)
    nan_line = next(ln for ln in text.split("\n") if "'loss': " in ln and "nan" in ln.split("'loss': ")[1][:6])
    assert ("'loss': nan" in nan_line) == (style == "tf4") and ("'loss': 'nan'" in nan_line) == (style == "tf5")
    assert "'entropy': None" in text  # GRPOTrainer.log: an all-NaN metric becomes None


def test_trl_checkpoints_state_and_completions(tmp_path):
    sc = small("trl-format-collapse", steps=31)
    _, plan = write_framework_run(sc, tmp_path)
    out = tmp_path / sim_trl.output_dir(sc)
    found = trl.checkpoints(out)
    assert found.steps == [20, 30] and not found.notes  # save_total_limit 2 rotated checkpoint-10 out
    state = trl.read_trainer_state(out / "checkpoint-30" / "trainer_state.json")
    assert state.meta["global_step"] == 30 and [r.step for r in state.rows] == list(range(1, 31))
    assert_rows([r for r in state.rows], [(n, k, v) for n, k, v in plan.rows if n <= 30], abs_=5e-5)
    done = trl.read_completions(out / "completions")
    assert {r.step for r in done.rows} == {30, 31} and not done.notes
    assert {"accuracy_reward", "format_reward"} <= set(done.rows[0].scores)


# ---- OpenRLHF --------------------------------------------------------------------------------------


def test_every_openrlhf_global_step_line_parses_and_key_order_varies(tmp_path):
    sc = small("openrlhf-crash-oom", steps=30)
    _, first = write_framework_run(sc, tmp_path)
    step = resume_point(tmp_path, sc)
    assert step == 20
    _, second = write_framework_run(next_attempt(sc, tmp_path, step, steps=30), tmp_path)
    rows = openrlhf.parse_console(lines.read_text(tmp_path / "train.log"))
    assert_rows(rows, first.rows + second.rows)
    text = lines.read_text(tmp_path / "train.log")
    dicts = re.findall(r"Global step \d+: (\{.*\})", text)
    orders = {tuple(k for k in parse_py_dict(d) if "/" not in k) for d in dicts}
    assert len(orders) == 2  # the actor's keys come out of a set: one order per process (launch)
    assert "checkpoint_states: {" in text and "--ckpt.load_enable" in text


def test_openrlhf_v080_status_lives_in_the_episode_bar(tmp_path):
    sc = small("openrlhf-healthy-v080", steps=12)
    _, plan = write_framework_run(sc, tmp_path)
    text = lines.read_text(tmp_path / "train.log")
    assert "Global step" not in text
    rows = openrlhf.parse_console(text)
    assert [r.step for r in rows if r.kind == "train"] == list(range(1, 13))
    first = rows[0].values
    meant = plan.rows[0][2]
    for key in ("reward", "policy_loss", "kl", "rollout/truncated_rate"):
        assert same(first[key], float(meant[key]), rel=6e-3, abs_=1e-9), key  # tqdm's `.3g`


# ---- crash signatures, detection -------------------------------------------------------------------

LOGS = {"verl": sim_verl.LOG, "trl": sim_trl.LOG, "openrlhf": "train.log"}


@pytest.mark.parametrize("name", [n for n, sc in FRAMEWORK_SCENARIOS.items() if EXPECTATIONS[sc.kind].ends_run])
def test_crash_output_carries_the_frameworks_signatures(tmp_path, name):
    sc = FRAMEWORK_SCENARIOS[name]
    _, plan = write_framework_run(sc, tmp_path)
    found = signatures.findings(signatures.scan_text(lines.read_text(tmp_path / LOGS[sc.framework])))
    assert plan.exit_code == 1 and plan.failing
    assert set(sc.expectation.expects) <= set(found), sorted(found)
    assert set(found) <= set(sc.expectation.expects) | set(sc.expectation.tolerates), sorted(found)
    if sc.framework == "trl":
        (child,) = found["run_crashed"]
        assert child.details["rank"] == plan.failing.removeprefix("rank")  # the root-cause rank
        assert child.details["exitcode"] == str(plan.failing_code if plan.failing_code < 0 else 1)


@pytest.mark.parametrize("name", ["verl-alarming-normal", "trl-alarming-normal", "openrlhf-alarming-normal"])
def test_normal_but_alarming_runs_raise_no_signature_finding(tmp_path, name):
    sc = FRAMEWORK_SCENARIOS[name]
    write_framework_run(sc, tmp_path)
    found = signatures.findings(signatures.scan_text(lines.read_text(tmp_path / LOGS[sc.framework])))
    assert set(found) <= {"run_finished"}, sorted(found)


@pytest.mark.parametrize("name", ["verl-healthy", "trl-healthy", "openrlhf-healthy"])
def test_runs_are_detected_as_their_framework_and_not_as_prime_rl(tmp_path, name):
    sc = small(name, steps=12)
    write_framework_run(sc, tmp_path)
    assert detect.detect_dir(tmp_path).framework == sc.framework
    with pytest.raises(RunNotFound):
        discover_run(tmp_path)


# ---- determinism -------------------------------------------------------------------------------------


def snapshot(root: Path) -> dict[str, tuple[bytes, float]]:
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime) for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", ["verl-reward-hacking", "trl-reward-hacking", "openrlhf-deepspeed-error"])
def test_same_scenario_same_bytes_and_times(tmp_path, name):
    sc = small(name)
    a, b = Growth(), Growth()
    write_framework_run(sc, tmp_path / "a", growth=a)
    write_framework_run(sc, tmp_path / "b", growth=b)
    assert snapshot(tmp_path / "a") == snapshot(tmp_path / "b")
    assert a.dumps(sc.framework) == b.dumps(sc.framework)
    write_framework_run(sc.variant(seed=sc.seed + 1000), tmp_path / "c")
    log = LOGS[sc.framework]
    assert (tmp_path / "a" / log).read_bytes() != (tmp_path / "c" / log).read_bytes()


def test_growth_records_every_write_of_the_console(tmp_path):
    sc = small("trl-healthy", steps=12)
    growth = Growth()
    _, plan = write_framework_run(sc, tmp_path, growth=growth)
    sizes = growth.appends[sim_trl.LOG]
    assert sizes[-1][0] == (tmp_path / sim_trl.LOG).stat().st_size
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in itertools.pairwise(sizes))
    assert sorted(map(int, growth.steps)) == sorted(plan.step_times)


def test_tqdm_meter_matches_tqdm():
    assert tqdm_meter(0, 40, 0.0) == "  0%|          | 0/40 [00:00<?, ?it/s]"
    assert tqdm_meter(3, 40, 202.4, "Training Progress", 1 / 64.92) == (
        "Training Progress:   8%|▊         | 3/40 [03:22<40:02, 64.92s/it]"
    )
    assert tqdm_meter(8, 8, 41.0, "Train epoch [1/1]", 8 / 41, "act_loss=-.0031") == (
        "Train epoch [1/1]: 100%|██████████| 8/8 [00:41<00:00,  5.12s/it, act_loss=-.0031]"
    )


# ---- the command -------------------------------------------------------------------------------------


@pytest.fixture
def cli():
    app = typer.Typer()
    app.command()(simulate)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args])


def test_list_names_the_framework_scenarios(cli):
    result = cli("--list")
    assert result.exit_code == 0
    listed = {line.split()[0]: line.split()[1] for line in result.output.splitlines()}
    for name, sc in FRAMEWORK_SCENARIOS.items():
        assert listed[name] == sc.framework
    assert sum(1 for line in result.output.splitlines() if "SIMULATED" in line) == len(FRAMEWORK_SCENARIOS)


def test_verl_writes_and_relaunch_resumes_by_default(cli, tmp_path):
    out = tmp_path / "run"
    first = cli("verl-crash-oom", out, "--steps", "30", "--onset", "14")
    assert first.exit_code == 0, first.output
    assert "run_crashed, cuda_oom" in first.output
    log = lines.read_text(out / sim_verl.LOG)
    assert "Error executing job with overrides" in log
    again = cli("verl-crash-oom", out, "trainer.resume_mode=disable")
    assert again.exit_code == 2 and "would start it from scratch" in again.output
    resumed = cli("verl-crash-oom", out)  # verl's resume_mode defaults to auto
    assert resumed.exit_code == 0, resumed.output
    log = lines.read_text(out / sim_verl.LOG)
    assert "Load from checkpoint folder:" in log and log.count("Setting global step to 10") == 1
    assert "trainer.resume_mode=auto" in log.split("Error executing job")[1]  # the relaunch's command echo
    rows = verl.read_console(out / sim_verl.LOG)
    assert [r.step for r in rows if r.kind == "train"][-1] == 30


def test_trl_and_openrlhf_resume_only_with_their_flags(cli, tmp_path):
    trl_dir, orl_dir = tmp_path / "trl", tmp_path / "orl"
    assert cli("trl-host-oom", trl_dir, "--steps", "30", "--onset", "14").exit_code == 0
    refused = cli("trl-host-oom", trl_dir)
    assert refused.exit_code == 2 and "--resume_from_checkpoint" in refused.output
    wrong = cli("trl-host-oom", trl_dir, "--ckpt.load_enable")
    assert wrong.exit_code == 2 and "not --ckpt.load_enable" in wrong.output
    missing = cli("trl-host-oom", trl_dir, "--resume_from_checkpoint", "Qwen2.5-0.5B-Instruct-GRPO/checkpoint-20")
    assert missing.exit_code == 2 and "no checkpoint to resume from" in missing.output
    ok = cli("trl-host-oom", trl_dir, "--resume_from_checkpoint", "Qwen2.5-0.5B-Instruct-GRPO/checkpoint-10")
    assert ok.exit_code == 0, ok.output
    assert trl.checkpoints(trl_dir / "Qwen2.5-0.5B-Instruct-GRPO").latest == 30

    assert cli("openrlhf-actor-died", orl_dir, "--steps", "30", "--onset", "14").exit_code == 0
    assert cli("openrlhf-actor-died", orl_dir).exit_code == 2
    ok = cli("openrlhf-actor-died", orl_dir, "--ckpt.load_enable")
    assert ok.exit_code == 0, ok.output
    assert openrlhf.checkpoints(orl_dir / "ckpt/checkpoints_ppo_ray").latest == 30


def test_flags_of_another_framework_are_refused(cli, tmp_path):
    assert "resumes with trainer.resume_mode=auto" in cli("verl-healthy", tmp_path / "a", "--ckpt.load_enable").output
    assert "unexpected argument" in cli("trl-healthy", tmp_path / "b", "trainer.resume_mode=auto").output
    assert "for verl, TRL and OpenRLHF" in cli("healthy-h", tmp_path / "c", "--ckpt.load_enable").output
    assert "prime-rl scenarios" in cli("trl-healthy", tmp_path / "d", "--layout", "H").output


def test_plans_are_consistent():
    for name, sc in FRAMEWORK_SCENARIOS.items():
        plan = plan_for(sc.variant(samples_kept=1))
        assert plan.parent in plan.roles and all(item.owner in plan.roles for item in plan.items), name
        assert all(title.strip() for title in plan.roles.values())
        times = [plan.step_times[n] for n in sorted(plan.step_times)]
        assert times == sorted(times), name
        assert (plan.exit_code == 1) == sc.ends_early, name
        assert os.path.basename(LOGS[sc.framework]) in {item.path for item in plan.items}
