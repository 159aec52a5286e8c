"""The check-in graph end to end on real run directories, across several check-ins."""

import json
from datetime import timedelta

import pytest

from rlagent.agents.report import build_report
from rlagent.agents.writer import write
from rlagent.graph.build import Nodes
from rlagent.graph.runner import Monitor
from rlagent.models.run import Health
from rlagent.tools.layout import discover_run

from conftest import loguru_line
from runbuilder import HRun


def monitor(run: HRun, tmp_path, **kwargs) -> Monitor:
    return Monitor(discover_run(run.dir), home=tmp_path / "home", offline=True, **kwargs)


def test_first_checkin_writes_summary_then_entry_and_later_ones_read_only_new_bytes(tmp_path):
    run = HRun(tmp_path)
    run.log("orchestrator.log", "WARNING", "Inference server was not reached after 10 seconds (Error: refused) on http://x:8000")
    run.steps(20)
    mon = monitor(run, tmp_path)
    first = mon.check_in()
    assert first.checkin == 1 and first.out.health is Health.HEALTHY and first.out.findings == []
    assert first.out.observation.trainer_step == 20 and first.out.observation.now == run.clock
    status = run.status()
    assert status.startswith("# Run status: reverse-text-run") and status.count("## 2026-11-20") == 1

    size_before = sum(p.stat().st_size for p in run.logs.iterdir())
    run.steps(5)
    grown = sum(p.stat().st_size for p in run.logs.iterdir()) - size_before
    second = mon.check_in()
    assert second.checkin == 2 and second.out.observation.bytes_read == grown
    assert sorted(second.memory.history.trainer) == list(range(1, 26))
    assert run.status().count("<!-- rlagent:checkin ") == 3  # summary + two entries
    mon.close()


def test_state_survives_the_monitor_restart(tmp_path):
    run = HRun(tmp_path)
    run.steps(10)
    monitor(run, tmp_path).check_in()
    run.steps(3)
    again = monitor(run, tmp_path).check_in()  # a new process would open the same store
    assert again.checkin == 2 and len(again.memory.history.trainer) == 13
    assert again.out.observation.bytes_read < 2000


def test_a_new_attempt_is_noticed_and_read(tmp_path):
    run = HRun(tmp_path)
    run.steps(12)
    mon = monitor(run, tmp_path)
    mon.check_in()
    run.new_attempt()
    run.step = 10
    run.log("trainer.log", "INFO", "Resuming training from checkpoint step 10")
    run.steps(4)
    state = mon.check_in()
    assert state.out.observation.new_attempt and state.memory.attempt == "attempt_2"
    assert any("new attempt attempt_2" in n for n in state.out.observation.notes)
    assert all(key.startswith("logs/attempt_2/") for key in state.memory.cursors)
    assert max(state.memory.history.trainer) == 14


def test_crash_after_append_before_checkpoint_never_duplicates(tmp_path):
    run = HRun(tmp_path)
    run.steps(10)
    crashing = monitor(run, tmp_path)

    def write_then_die(state):
        write(state, crashing._writer_deps)
        raise RuntimeError("killed between the append and the checkpoint")

    nodes = Nodes(crashing.nodes.collector, crashing.nodes.diagnostician, write_then_die)
    dying = Monitor(discover_run(run.dir), home=tmp_path / "home", offline=True, nodes=nodes)
    with pytest.raises(RuntimeError):
        dying.check_in()
    assert run.status().count("#1 -->") == 1
    pending = monitor(run, tmp_path).graph.get_state({"configurable": {"thread_id": crashing.key}})
    assert pending.next == ("writer",)
    run.steps(2)
    # The next check-in first finishes #1 from its checkpoint (its entry is already there),
    # then runs #2.
    redo = monitor(run, tmp_path).check_in()
    assert redo.checkin == 2 and redo.out.written is True
    assert run.status().count("#1 -->") == 1 and run.status().count("#2 -->") == 1


def test_a_finding_that_persists_is_said_to_persist(tmp_path):
    run = HRun(tmp_path)
    run.steps(15, entropy=lambda s: 0.6)
    run.steps(12, entropy=lambda s: 0.01)
    mon = monitor(run, tmp_path)
    first = mon.check_in()
    assert [f.id for f in first.out.findings] == ["entropy_collapse"]
    run.clock += timedelta(hours=1)
    run.steps(3, entropy=lambda s: 0.01)
    second = mon.check_in()
    (finding,) = second.out.findings
    assert finding.checkins == 2 and finding.since == first.out.observation.now
    assert "persisting for 2 check-ins" in second.out.status_entry
    assert second.out.health is Health.DEGRADED


def test_two_runs_keep_separate_state(tmp_path):
    a, b = HRun(tmp_path, "run-a"), HRun(tmp_path, "run-b")
    a.steps(5)
    b.steps(9)
    ma, mb = monitor(a, tmp_path), monitor(b, tmp_path)
    assert ma.dir != mb.dir
    ma.check_in()
    mb.check_in()
    assert ma.check_in().checkin == 2 and mb.state().checkin == 1
    assert mb.state().out.observation.trainer_step == 9


def test_no_write_leaves_status_untouched(tmp_path):
    run = HRun(tmp_path)
    run.steps(5)
    (run.dir / "STATUS.md").write_text("mine\n")
    state = monitor(run, tmp_path, write=False).check_in()
    assert run.status() == "mine\n" and state.out.status_entry.startswith("## 2026-11-20")


def test_run_with_no_step_yet_and_malformed_files(tmp_path):
    run = HRun(tmp_path)
    run.log("orchestrator.log", "INFO", "Starting orchestrator (algorithm: grpo)")
    (run.dir / "configs" / "trainer.json").write_text("{not json")
    (run.dir / "metrics.jsonl").write_text('{"step": 1, "time": 1.0, "optim/lr": 1e-6}\n{"step": tru\n')
    state = monitor(run, tmp_path).check_in()
    report = build_report(state)
    assert report["step"] == 1  # from the one good metrics row
    notes = " | ".join(report["notes"])
    assert "configs/trainer.json: malformed JSON" in notes and "metrics.jsonl: skipped 1 malformed row(s)" in notes
    assert "configs/trainer.json: malformed JSON" in state.out.status_entry
    json.dumps(report)


def test_empty_run_dir_checks_in_with_nothing_to_say(tmp_path):
    run = HRun(tmp_path)
    state = monitor(run, tmp_path).check_in()
    assert state.out.observation.trainer_step is None
    assert "**Step**: n/a / 100" in state.out.status_entry


REWARD_KEY = "train/agg/all/reverse-text/reward/mean"


def test_a_metrics_row_read_before_its_step_line_keeps_its_figures(tmp_path):
    """metrics.jsonl holds the step's figures in full and the step line prints them rounded: whichever
    of the two a check-in meets first, the history keeps the full ones (a check-in between the two
    writes would otherwise leave the rounded reward of that step for good)."""
    run = HRun(tmp_path)
    run.steps(10, reward=lambda s: 0.3 + 0.0012345 * s)
    start = run.clock - timedelta(seconds=400)
    rows = "".join(
        json.dumps({"step": s, "time": (start + timedelta(seconds=40 * s)).timestamp(), REWARD_KEY: 0.3 + 0.0012345 * s}) + "\n"
        for s in range(1, 12)
    )
    (run.dir / "metrics.jsonl").write_text(rows)  # step 11's row is written...
    mon = monitor(run, tmp_path)
    first = mon.check_in()
    assert first.memory.history.orchestrator[11]["reward"] == 0.3 + 0.0012345 * 11
    run.steps(1, reward=lambda s: 0.3 + 0.0012345 * s)  # ...before its step line `Reward 0.3136`
    second = mon.check_in()
    mon.close()
    assert [second.memory.history.orchestrator[s]["reward"] for s in (10, 11)] == [0.3 + 0.0012345 * s for s in (10, 11)]


def test_a_crash_the_run_came_back_from_is_noted_however_many_events_are_read_after_it(tmp_path):
    """`came back since` is said at the check-in that reads the crash. The logs are read one after
    the other, the trainer's first: 250 env errors read after it (the newest 50 of each file: the
    orchestrator's and four env servers') must not push it out of what that check-in read."""
    run = HRun(tmp_path)
    run.steps(20)
    mon = monitor(run, tmp_path)
    mon.check_in()
    run.clock += timedelta(minutes=1)
    run.log("trainer.log", "ERROR", "Fatal error in train")
    run.clock += timedelta(minutes=10)
    run.log("trainer.log", "INFO", "Resuming training from checkpoint step 20")
    run.steps(10)
    clock = run.clock.strftime("%H:%M:%S")
    failures = [f"Trace failed in group {i:08x} (env-{i % 4}) — TimeoutError" for i in range(60)]
    run._append("orchestrator.log", "".join(loguru_line(clock, "WARNING", message) for message in failures))
    for env in range(4):
        (run.logs / "envs" / "train").mkdir(parents=True, exist_ok=True)
        run._append(f"envs/train/env-{env}.log", "".join(loguru_line(clock, "ERROR", f"request failed: {i}") for i in range(60)))
    state = mon.check_in()
    crashed = [f for f in state.out.findings if f.id == "run_crashed"]
    assert [(f.severity.value, "came back since" in f.summary) for f in crashed] == [("info", True)]
    assert state.out.health is not Health.DOWN
    run.clock += timedelta(hours=1)
    run.steps(3)
    assert "run_crashed" not in {f.id for f in mon.check_in().out.findings}  # said once
