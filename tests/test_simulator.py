"""The simulator writes prime-rl runs exactly as prime-rl would (prime-rl-formats.md)."""

from __future__ import annotations

import io
import itertools
import json
import math
import os
import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from loguru._datetime import datetime as loguru_datetime
from loguru._logger import Core, Logger

from rlagent.evals.simulator import SCENARIOS, append_run, write_big_h_run, write_run
from rlagent.evals.simulator.bigrun import append_big_h_run, last_trainer_step
from rlagent.evals.simulator.logfmt import format_time, loguru_line, prefix_lines
from rlagent.evals.simulator.metrics import reward_name
from rlagent.tools.patterns import classify

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LINE = re.compile(r"^(?:\[trainer0\]:)?(\d\d:\d\d:\d\d) +(DEBUG|INFO|SUCCESS|WARNING|ERROR) (.*)$")
SEGMENT = re.compile(r"^(?P<k>[A-Za-z][A-Za-z .\-]*?):? (?P<v>[-+]?(?:\d[\d.]*(?:e[-+]?\d+)?|nan|inf))(?P<u>\S*)(?: .*)?$")
PRIME_RL_FORMAT = "<dim>{time:HH:mm:ss}</dim> <level>{level: >7}</level> <level>\x1b[22m{message}\x1b[0m</level>"


def small(name: str, **changes: object):
    """A registry scenario, shortened so a test writes it in a few hundred ms."""
    return SCENARIOS[name].variant(**{"batch_size": 32, "group_size": 8, "eval_examples": 8, **changes})


def plain_lines(path: Path) -> list[str]:
    return ANSI.sub("", path.read_text()).splitlines()


def step_lines(path: Path) -> dict[int, dict[str, str]]:
    """step -> {label: value} from the SUCCESS `Step N |` lines of a log."""
    out: dict[int, dict[str, str]] = {}
    for line in plain_lines(path):
        m = LINE.match(line)
        if not m or m.group(2) != "SUCCESS" or not m.group(3).startswith("Step "):
            continue
        head, *segments = m.group(3).split(" | ")
        fields = {}
        for seg in segments:
            sm = SEGMENT.match(seg)
            if sm:
                fields[sm.group("k")] = sm.group("v")
        out[int(head.split()[1])] = fields
    return out


def metrics_rows(run: Path) -> list[dict]:
    def no_constants(name: str) -> float:
        raise AssertionError(f"non-finite constant {name} in metrics.jsonl")

    return [json.loads(line, parse_constant=no_constants) for line in (run / "metrics.jsonl").read_text().splitlines()]


# ---- loguru bytes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "message"),
    [
        ("INFO", "Train batch 96/128 (75.0%) (+12 buffered); 64 inflight episodes (train=64, eval=0)"),
        ("SUCCESS", "Step 3 |   41.2s | Reward 0.4312 | Trainable 112/128 (87.5%)"),
        ("WARNING", "Trace failed in group 5c1e9f0a (reverse-text) — TimeoutError: x"),
        ("ERROR", "Fatal error in train"),
        ("DEBUG", "Stopping dispatcher"),
        ("SUCCESS", "Step 3 |   41.2s | Reward 0.4\n\t\t ╰─ a | Ratio 50.0%\n\t\t ╰─ b | Ratio 50.0%"),
    ],
)
def test_formatter_is_byte_identical_to_real_loguru(level: str, message: str) -> None:
    when = loguru_datetime(2026, 8, 24, 23, 59, 58, tzinfo=UTC)
    logger = Logger(Core(), None, 0, False, False, False, False, True, [], {})
    sink = io.StringIO()
    logger.add(sink, format=PRIME_RL_FORMAT, level="DEBUG", colorize=True)
    logger.patch(lambda record: record.update(time=when)).log(level, message)
    assert loguru_line("23:59:58", level, message) == sink.getvalue()


def test_trainer_prefix_goes_on_every_line_including_continuations() -> None:
    text = loguru_line("14:00:00", "ERROR", "Fatal error in train", "Traceback (most recent call last):\n\n  x\n")
    lines = prefix_lines(text).splitlines()
    assert len(lines) == 4
    assert all(line.startswith("[trainer0]:") for line in lines)


def test_tracebacks_are_loguru_renderings_of_prime_rl_frames_only() -> None:
    from rlagent.evals.simulator.tracebacks import render, trainer_oom_frames

    text = render(trainer_oom_frames(3, "Qwen/Qwen3-0.6B"), "torch.OutOfMemoryError", "CUDA out of memory. x")
    plain = ANSI.sub("", text)
    assert text.startswith("\x1b[33m\x1b[1mTraceback (most recent call last):")
    files = re.findall(r'^[ >] File "([^"]+)"', plain, re.M)
    assert files[0].endswith("prime_rl/trainer/rl/train.py") and all(f.startswith("/workspace/prime-rl/") for f in files)
    assert "evals/simulator" not in plain and "└ " in plain and "│" in plain
    assert plain.rstrip().endswith("torch.OutOfMemoryError: CUDA out of memory. x")


def test_severity_scales_the_failure() -> None:
    from rlagent.evals.simulator.dynamics import Dynamics

    nan = Dynamics(SCENARIOS["nan-h"].variant(severity=0.4, steps=200, onset_step=20))
    share = sum(nan.at(n).nonfinite for n in range(21, 200)) / 179
    assert nan.at(20).nonfinite and not nan.at(19).nonfinite and 0.25 < share < 0.55
    mild = Dynamics(SCENARIOS["truncation-l"].variant(severity=0.3))
    hard = Dynamics(SCENARIOS["truncation-l"])
    assert mild.at(19).truncation < 0.1 and mild.at(60).truncation < hard.at(60).truncation - 0.15


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.85, "850ms"), (41.23, "41.2s"), (125, "2m 5s"), (120, "2m"), (3780, "1h 3m"), (93600, "1d 2h")],
)
def test_format_time(seconds: float, text: str) -> None:
    assert format_time(seconds) == text


# ---- layouts ----------------------------------------------------------------------------------


def test_h_tree_matches_the_formats_doc(tmp_path: Path) -> None:
    sc = small("healthy-h", steps=12, ckpt_interval=5, eval_interval=5)
    run = write_run(sc, tmp_path / "run")
    logs = run / "logs" / "attempt_1"
    for name in ("trainer.log", "orchestrator.log", "inference.log", "envs/train/reverse-text.log"):
        assert (logs / name).stat().st_size > 0, name
    latest = run / "logs" / "latest"
    assert latest.is_symlink() and os.readlink(latest) == "attempt_1"
    for step in (5, 10):
        assert (run / f"checkpoints/step_{step}/trainer/.metadata").is_file()
        assert (run / f"checkpoints/step_{step}/orchestrator/progress.pt").is_file()
    assert not (run / "checkpoints/step_15").exists()
    kept = sorted(p.name for p in (run / "rollouts").iterdir())
    assert len(kept) == sc.rollout_steps_kept
    for subset in ("all", "effective"):
        assert (run / "rollouts" / kept[-1] / "train" / subset / "traces.jsonl").stat().st_size > 0
    assert any((run / "broadcasts").glob("step_*/STABLE"))
    trainer = json.loads((run / "configs/trainer.json").read_text())
    orch = json.loads((run / "configs/orchestrator.json").read_text())
    assert trainer["max_steps"] == sc.max_steps and trainer["model"] == trainer["model"] | {"name": sc.model}
    assert trainer["ckpt"]["interval"] == 5 and trainer["resume"] == {"step": None, "dir": None}
    assert trainer["output_dir"].endswith(sc.run_name)
    assert orch["batch_size"] == 32 and orch["group_size"] == 8 and orch["max_off_policy_steps"] == 8
    assert orch["train"]["sampling"]["max_completion_tokens"] == sc.max_completion_tokens
    assert [s["name"] for s in orch["train"]["source"]] == ["reverse-text"]
    assert json.loads((run / "configs/inference.json").read_text())["server"]["port"] == 8000
    assert not (run / "weights").exists() and not (run / "run_default").exists()


def test_l_tree_matches_the_formats_doc(tmp_path: Path) -> None:
    sc = small("healthy-l", steps=12, ckpt_interval=5, eval_interval=5)
    run = write_run(sc, tmp_path / "run")
    for name in ("trainer.log", "orchestrator.log", "inference.log", "envs/train/reverse-text/env_server.log"):
        assert (run / "logs" / name).stat().st_size > 0, name
    assert not (run / "metrics.jsonl").exists() and not (run / "logs" / "latest").exists()
    assert (run / "checkpoints/step_10/trainer/.metadata").is_file()
    assert (run / "weights/step_10/model.safetensors").is_file()
    assert (run / "run_default/checkpoints/step_10/orchestrator/progress.pt").is_file()
    orch = tomllib.loads((run / "configs/orchestrator.toml").read_text())
    trainer = tomllib.loads((run / "configs/trainer.toml").read_text())
    assert orch["rollouts_per_example"] == 8 and orch["max_async_level"] == 1 and orch["seq_len"] == sc.seq_len
    assert orch["train"]["sampling"]["max_completion_tokens"] == sc.max_completion_tokens
    assert orch["output_dir"] == "outputs/run_default" and trainer["output_dir"] == "outputs"
    assert trainer["model"]["seq_len"] == sc.seq_len and trainer["ckpt"]["interval"] == 5
    step_dir = sorted((run / "run_default/rollouts").iterdir())[-1]
    rows = [json.loads(line) for line in (step_dir / "train_rollouts.jsonl").read_text().splitlines()]
    assert len(rows) == 32
    for row in rows:
        assert {
            "example_id",
            "prompt",
            "completion",
            "reward",
            "is_completed",
            "is_truncated",
            "metrics",
            "timing",
            "advantage",
            "env_name",
        } <= row.keys()
        assert row["prompt"][-1]["role"] == "user" and row["completion"][0]["role"] == "assistant"
    # L step lines use `Key: value` and the L orchestrator fields
    orch_steps = step_lines(run / "logs/orchestrator.log")
    assert {"Time", "Reward", "Seq. Length", "Max. Off-Policy Level"} <= orch_steps[5].keys()
    assert "Truncation" not in orch_steps[5]
    assert {"Time", "Loss", "Entropy", "Grad. Norm", "Peak Mem."} <= step_lines(run / "logs/trainer.log")[5].keys()


# ---- metrics.jsonl ----------------------------------------------------------------------------


def test_metrics_rows_parse_and_interleave(tmp_path: Path) -> None:
    sc = small("healthy-h", steps=15, eval_interval=5)
    run = write_run(sc, tmp_path / "run")
    rows = metrics_rows(run)
    assert all(list(row)[:2] == ["step", "time"] for row in rows)
    times = [row["time"] for row in rows]
    assert times == sorted(times)
    trainer = [
        r
        for r in rows
        if "optim/lr" in r
        or "loss/mean" in r
        or "perf/mfu" in r
        or "time/wait_for_batch" in r
        or "system/ckpt_disk_free_ratio" in r
    ]
    orch = [r for r in rows if "progress/total_rollouts" in r]
    evals = [r for r in rows if any(k.startswith("eval/") for k in r)]
    assert len(trainer) == 5 * 15 and {r["step"] for r in trainer} == set(range(1, 16))
    assert all(isinstance(r["step"], int) for r in trainer + orch)
    assert [r["step"] for r in evals] == [5.0, 10.0, 15.0] and all(isinstance(r["step"], float) for r in evals)
    for key in (
        "train/agg/all/agent/reward/mean",
        "train/agg/all/agent/reward/p90",
        "train/agg/all/has_error/mean",
        "train/agg/all/agent/is_truncated/mean",
        "train/agg/all/agent/is_trainable/mean",
        "train/agg/all/num_output_tokens/mean",
        "time/step",
        "time/wait_for_policy",
        "off_policy/max",
        "progress/total_tokens",
    ):
        assert all(key in r for r in orch), key
    # two processes appending: the orchestrator runs ahead, its row for step n+1 lands before
    # the trainer's rows for step n
    order = [("O", r["step"]) if r in orch else ("T", r["step"]) for r in rows if r in orch or r in trainer]
    ahead = [n for n in range(1, 14) if order.index(("O", n + 1)) < order.index(("T", n))]
    assert ahead, order
    sources = "".join(kind for kind, _ in order)
    assert "TO" in sources and "OT" in sources


def test_nan_never_reaches_metrics_jsonl(tmp_path: Path) -> None:
    sc = small("nan-h", steps=20, onset_step=14)
    run = write_run(sc, tmp_path / "run")
    assert not re.search(r"NaN|Infinity", (run / "metrics.jsonl").read_text())
    rows = metrics_rows(run)
    before = [r for r in rows if r["step"] == 13 and "optim/lr" in r]
    at = [r for r in rows if r["step"] == 14 and "optim/lr" in r]
    assert "optim/grad_norm" in before[0] and "optim/grad_norm" not in at[0]
    assert not [r for r in rows if r["step"] == 14 and "loss/mean" in r]
    assert [r for r in rows if r["step"] == 14 and "loss/mean" not in r and "is_masked/mean" in r]
    trainer_steps = step_lines(run / "logs/latest/trainer.log")
    assert trainer_steps[13]["Loss"] != "nan" and trainer_steps[14]["Loss"] == "nan"
    assert trainer_steps[14]["Grad. Norm"] == "nan"
    warnings = [line for line in plain_lines(run / "logs/latest/trainer.log") if "non-finite" in line]
    assert any("Dropping 1 non-finite value(s) from metrics.jsonl: optim/grad_norm" in w for w in warnings)
    assert all(classify(LINE.match(w).group(3), "WARNING")[0] == "nonfinite_dropped" for w in warnings)


# ---- rollouts ---------------------------------------------------------------------------------


def test_traces_reward_is_sum_of_score_times_weight(tmp_path: Path) -> None:
    sc = small("healthy-h", steps=10)
    run = write_run(sc, tmp_path / "run")
    step_dir = sorted((run / "rollouts").iterdir(), key=lambda p: int(p.name.split("_")[1]))[-1]
    step = int(step_dir.name.split("_")[1])
    effective = [json.loads(line) for line in (step_dir / "train/effective/traces.jsonl").read_text().splitlines()]
    everything = [json.loads(line) for line in (step_dir / "train/all/traces.jsonl").read_text().splitlines()]
    assert len(effective) == sc.batch_size and len(everything) >= len(effective)
    rewards = []
    for episode in effective:
        assert "reward" not in episode and episode["ok"] and episode["run"]["work"]["step"] == step
        (trace,) = episode["traces"]
        assert "reward" not in trace and "advantage" in trace["info"]
        assert trace["nodes"][-1]["message"]["role"] == "assistant"
        rewards.append(sum(r["score"] * r["weight"] for r in trace["rewards"].values() if r is not None))
        assert set(trace["rewards"]) == {reward_name("reverse-text")}
    orch_reward = float(step_lines(run / "logs/latest/orchestrator.log")[step]["Reward"])
    assert all(0 <= r <= 1 for r in rewards)
    assert abs(sum(rewards) / len(rewards) - orch_reward) < 0.15
    failed = [e for e in everything if not e["ok"]]
    assert all(e["errors"] and not e["traces"][0]["rewards"] for e in failed)


# ---- determinism, time ------------------------------------------------------------------------


def _snapshot(root: Path) -> dict[str, tuple[bytes, float]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    sc = small("healthy-multienv-h", steps=8)
    a = _snapshot(write_run(sc, tmp_path / "a"))
    b = _snapshot(write_run(sc, tmp_path / "b"))
    c = _snapshot(write_run(sc.variant(seed=99), tmp_path / "c"))
    assert a == b
    assert a["logs/attempt_1/orchestrator.log"] != c["logs/attempt_1/orchestrator.log"]


def test_append_continues_exactly(tmp_path: Path) -> None:
    sc = small("healthy-h", steps=6)
    write_run(sc, tmp_path / "a")
    longer = append_run(sc, tmp_path / "a", steps=11)
    assert longer.steps == 11
    once = _snapshot(write_run(longer, tmp_path / "b"))
    appended = _snapshot(tmp_path / "a")
    for rel, content in once.items():
        if not rel.startswith("rollouts/"):
            assert appended[rel] == content, rel


def test_a_run_can_cross_midnight(tmp_path: Path) -> None:
    start = datetime(2026, 8, 24, 23, 45, tzinfo=UTC)
    sc = small("healthy-h", steps=25, start=start)
    run = write_run(sc, tmp_path / "run")
    clocks = [LINE.match(line).group(1) for line in plain_lines(run / "logs/latest/orchestrator.log") if LINE.match(line)]
    assert clocks[0].startswith("23:4") and clocks[-1].startswith("00:")
    wrap = next(i for i, (x, y) in enumerate(itertools.pairwise(clocks)) if y < x)
    assert clocks[wrap].startswith("23:59") and clocks[wrap + 1].startswith("00:00")
    assert re.search(r"INFO 08-25 00:0\d:\d\d \[loggers\.py", (run / "logs/latest/inference.log").read_text())
    last = datetime.fromtimestamp((run / "logs/latest/orchestrator.log").stat().st_mtime, UTC)
    assert last.date() == datetime(2026, 8, 25).date() and f"{last:%H:%M:%S}" == clocks[-1]
    # logs show local wall time of log_tz, mtimes stay absolute
    shifted = write_run(sc.variant(log_tz="America/New_York"), tmp_path / "ny")
    first_ny = LINE.match(plain_lines(shifted / "logs/latest/orchestrator.log")[0]).group(1)
    assert first_ny.startswith("19:4")
    assert (shifted / "metrics.jsonl").stat().st_mtime == (run / "metrics.jsonl").stat().st_mtime


# ---- injected failures --------------------------------------------------------------------------


def test_entropy_collapse_follows_onset_and_severity(tmp_path: Path) -> None:
    for onset in (10, 16):
        sc = small("entropy-collapse-h", steps=36, onset_step=onset)
        steps = step_lines(write_run(sc, tmp_path / f"o{onset}") / "logs/latest/trainer.log")
        early = sum(float(steps[n]["Entropy"]) for n in range(2, 7)) / 5
        assert float(steps[onset - 1]["Entropy"]) > 0.7 * early
        assert float(steps[36]["Entropy"]) < 0.05 * early


def test_crash_oom_stops_the_trainer_at_onset(tmp_path: Path) -> None:
    sc = small("crash-oom-h", steps=30, onset_step=9)
    run = write_run(sc, tmp_path / "run")
    trainer = run / "logs/latest/trainer.log"
    assert max(step_lines(trainer)) == 8
    text = ANSI.sub("", trainer.read_text())
    assert "ERROR Fatal error in train" in text
    assert re.search(r"^\[trainer0\]:torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate", text, re.M)
    assert re.search(r"^\[trainer0\]:> File \".*/prime_rl/utils/utils\.py\", line \d+, in sync_wrapper$", text, re.M)
    assert "torch.distributed.elastic.multiprocessing.errors.ChildFailedError" in text
    # the header line is a crash; the traceback's last line (a continuation) names the OOM
    header = next(m for line in text.splitlines() if (m := LINE.match(line)) and m.group(2) == "ERROR")
    assert classify(header.group(3), "ERROR")[0] == "crash"
    continuation = {classify(line.removeprefix("[trainer0]:"), "INFO")[0] for line in text.splitlines()}
    assert {"cuda_oom", "crash"} <= continuation
    # nothing is written after the teardown
    crash = datetime.fromtimestamp(trainer.stat().st_mtime, UTC)
    newest = max(p.stat().st_mtime for p in run.rglob("*") if p.is_file())
    assert newest - crash.timestamp() < 5


def test_truncation_l_climbs_past_sixty_percent(tmp_path: Path) -> None:
    sc = small("truncation-l", steps=50, onset_step=15)
    run = write_run(sc, tmp_path / "run")
    steps = step_lines(run / "logs/orchestrator.log")
    assert float(steps[10]["Seq. Length"]) < 0.5 * sc.seq_len < 0.8 * sc.seq_len < float(steps[50]["Seq. Length"])
    last = sorted((run / "run_default/rollouts").iterdir(), key=lambda p: int(p.name.split("_")[1]))[-1]
    rows = [json.loads(line) for line in (last / "train_rollouts.jsonl").read_text().splitlines()]
    assert sum(r["is_truncated"] for r in rows) / len(rows) > 0.6


def test_healthy_run_has_the_normal_alarming_lines(tmp_path: Path) -> None:
    sc = small("healthy-h", steps=40)
    run = write_run(sc, tmp_path / "run")
    events: dict[str, list[str]] = {}
    for name in ("orchestrator.log", "trainer.log"):
        for line in plain_lines(run / "logs/latest" / name):
            m = LINE.match(line)
            if m:
                kind, _ = classify(m.group(3), m.group(2))
                events.setdefault(kind or "", []).append(m.group(1))
    first_step = next(
        LINE.match(x).group(1) for x in plain_lines(run / "logs/latest/orchestrator.log") if "SUCCESS Step 1 |" in x
    )
    assert events["inference_unreachable"] and max(events["inference_unreachable"]) < first_step
    assert events["no_nvlink"] and len(events["paused_normal"]) >= 3
    fails = len(events.get("env_error", []))
    assert fails < 0.02 * sc.batch_size * sc.steps
    grads = [float(v["Grad. Norm"]) for v in step_lines(run / "logs/latest/trainer.log").values()]
    median = sorted(grads)[len(grads) // 2]
    assert sum(g > 2.5 * median for g in grads) == 1
    steps = step_lines(run / "logs/latest/orchestrator.log")
    assert float(steps[40]["Reward"]) > float(steps[2]["Reward"]) + 0.1


def test_big_run_reaches_target_and_appends(tmp_path: Path) -> None:
    run = write_big_h_run(tmp_path / "big", 3_000_000)
    logs = [*(run / "logs/attempt_1").rglob("*.log"), run / "metrics.jsonl"]
    size = sum(p.stat().st_size for p in logs)
    assert 3_000_000 <= size < 4_500_000  # the target counts logs and metrics, not rollouts
    before = last_trainer_step(run)
    log = run / "logs/latest/inference.log"
    inference_before = log.stat().st_size
    after = append_big_h_run(run, 1_500_000)
    assert after > before and last_trainer_step(run) == after
    assert log.stat().st_size - inference_before > 1_000_000
    assert math.isclose(log.stat().st_mtime, (run / "metrics.jsonl").stat().st_mtime, abs_tol=30)
