"""The check-in graph end to end on the bundled example runs and on simulated prime-rl runs of
both layouts, several seeds each: the diagnosis, not just that something ran."""

import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rlagent.agents.report import build_report
from rlagent.evals.simulator import SCENARIOS, append_run, write_run
from rlagent.graph.runner import Monitor
from rlagent.models.run import Health
from rlagent.tools.layout import discover_run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "runs"
ENTRY = re.compile(
    # each field line but the last ends with two spaces (a Markdown hard line break)
    r"^## \d{4}-\d\d-\d\d \d\d:\d\d UTC\n\*\*Step\*\*: \d+ / \d+  \n\*\*Health\*\*: (Healthy|Degraded|Down)  \n"
    r"\*\*Progress\*\*: .+  \n\*\*Stability\*\*: .+  \n\*\*Performance\*\*: .+?(  \n\*\*Notes\*\*:\n(.+\n)+|\n)"
    r"<!-- rlagent:checkin (?:[0-9a-f]+ )?[\w.-]+#\d+ -->$"
)


def check(run_dir, tmp_path):
    return Monitor(discover_run(run_dir), home=tmp_path / "home", offline=True).check_in()


def copy_example(name, tmp_path):
    """A fresh copy, dated as if recorded on 2026-11-21 (git does not keep mtimes)."""
    target = tmp_path / name
    shutil.copytree(EXAMPLES / name, target, symlinks=True)
    stamp = datetime(2026, 11, 21, 23, 59, 59, tzinfo=UTC).timestamp()
    for path in target.rglob("*"):
        if path.is_file() and not path.is_symlink():
            os.utime(path, (stamp, stamp))
    return target


def test_bundled_h_run_is_healthy_despite_alarming_but_normal_lines(tmp_path):
    state = check(copy_example("reverse-text-h", tmp_path), tmp_path)
    report = build_report(state)
    assert (report["layout"], report["health"], report["step"], report["max_steps"]) == ("H", "Healthy", 58, 200)
    assert [f["id"] for f in report["findings"] if f["severity"] != "info"] == []
    entry = report["status_entry"]
    assert ENTRY.match(entry), entry
    # The normal-but-alarming lines are there, counted, and not findings.
    assert "Inference server was not reached" in entry and "No NVLink detected" in entry
    assert "Trace failed in group <id>" in entry
    assert report["checked_at"].startswith("2026-11-21T")


def test_bundled_l_run_shows_its_truncation(tmp_path):
    state = check(copy_example("reverse-text-l", tmp_path), tmp_path)
    assert state.run.layout.value == "L" and state.out.health is Health.DEGRADED
    ids = {f.id: f for f in state.out.findings}
    assert "truncation_high" in ids and ids["truncation_high"].severity.value == "warning"
    assert ids["truncation_high"].last_step == 60
    assert ENTRY.match(state.out.status_entry), state.out.status_entry
    assert "truncated" in state.out.status_entry  # a truncated sample is quoted


@pytest.mark.parametrize("copied_at", ["09:00", "09:30", "10:20", "10:37", "16:00"])
def test_a_run_copied_without_its_mtimes_is_dated_the_same_whenever_it_was_copied(tmp_path, copied_at):
    """The bundled L run's processes last logged between 09:15 and 10:38 (May 2026): copied at any
    time of day (git, `scp -r`), its files' mtimes are all that time. Anchored file by file, a copy
    made between two of those times dated the later files a day before the others: at 10:20, a
    trainer stalled for 23 h, Down (tools/dayclock.shared_anchor)."""
    run = copy_example("reverse-text-l", tmp_path)
    hour, minute = map(int, copied_at.split(":"))
    stamp = datetime(2026, 11, 21, hour, minute, tzinfo=UTC).timestamp()
    for path in run.rglob("*"):
        if path.is_file():
            os.utime(path, (stamp, stamp))
    state = check(run, tmp_path)
    day = 21 if copied_at in ("10:37", "16:00") else 20  # the last 10:38 at or before the copy (2 min of clock drift allowed)
    assert state.out.observation.now == datetime(2026, 11, day, 10, 38, 18, tzinfo=UTC)
    assert state.out.health is Health.DEGRADED
    assert {f.id for f in state.out.findings} == {"reward_regression", "truncation_high", "step_time_regression"}


EXPECTED = {
    "healthy-h": (Health.HEALTHY, set()),
    "healthy-l": (Health.HEALTHY, set()),
    "healthy-multienv-h": (Health.HEALTHY, set()),
    "finished-h": (Health.HEALTHY, {"run_finished"}),
    "entropy-collapse-h": (Health.DEGRADED, {"entropy_collapse"}),
    "nan-h": (Health.DEGRADED, {"nan_detected"}),
    "crash-oom-h": (Health.DOWN, {"run_crashed", "cuda_oom"}),
    "truncation-l": (Health.DEGRADED, {"truncation_high"}),
}


@pytest.mark.parametrize("seed", [11, 29])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_simulated_runs_are_diagnosed(name, seed, tmp_path):
    scenario = SCENARIOS[name].variant(seed=seed, rollout_steps_kept=SCENARIOS[name].steps)
    run = write_run(scenario, tmp_path / name)
    state = check(run, tmp_path)
    health, must = EXPECTED[name]
    ids = {f.id for f in state.out.findings}
    assert must <= ids, (name, seed, state.out.findings)
    if not must:
        assert not [f for f in state.out.findings if f.severity.value != "info"], state.out.findings
    assert state.out.health is health, state.out.findings


def test_a_run_growing_between_checkins_is_read_incrementally(tmp_path):
    scenario = SCENARIOS["healthy-h"].variant(steps=20, seed=5)
    run = write_run(scenario, tmp_path / "growing")
    monitor = Monitor(discover_run(run), home=tmp_path / "home", offline=True)
    first = monitor.check_in()
    sizes = {p: p.stat().st_size for p in run.rglob("*.log")} | {run / "metrics.jsonl": (run / "metrics.jsonl").stat().st_size}
    append_run(scenario, run, steps=45)
    grown = sum(p.stat().st_size - sizes.get(p, 0) for p in [*run.rglob("*.log"), run / "metrics.jsonl"])
    second = monitor.check_in()
    assert first.out.observation.trainer_step < second.out.observation.trainer_step <= 45
    assert second.out.observation.bytes_read == grown
    assert set(range(1, second.out.observation.trainer_step + 1)) <= set(second.memory.history.trainer)
    assert second.out.health is Health.HEALTHY and (run / "STATUS.md").read_text().count("<!-- rlagent:checkin") == 3
