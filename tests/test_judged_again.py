"""A check-in that reads nothing new judges the run as the check-in before it did.

Between two offline check-ins of a copied fixture nothing is written and "now" is the newest line
either time, so every finding must come back with the same words, evidence aside. News is the one
exception, by design: a crash the run already came back from is noted once, at the check-in that
read it (`came back since`, agents/rules/health.py).
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta

from rlagent.agents.collector import EVENTS_PER_KIND, _bounded_events
from rlagent.evals.fixture import fixture_dirs
from rlagent.graph.runner import Monitor
from rlagent.models.observation import LogEvent
from rlagent.tools.adapters import discover


def _judged(state) -> set[tuple[str, str, str]]:
    return {(f.id, f.severity.value, f.summary) for f in state.out.findings if "came back since" not in f.summary}


def test_every_fixture_is_judged_the_same_by_a_check_in_that_reads_nothing_new(tmp_path):
    changed = []
    for case in fixture_dirs():
        run = tmp_path / case.name
        shutil.copytree(case / "run", run, symlinks=True, copy_function=shutil.copy2)
        monitor = Monitor(discover(run), home=tmp_path / f"{case.name}-home", offline=True)
        try:
            first, second = monitor.check_in(), monitor.check_in()
        finally:
            monitor.close()
        if (first.out.health, _judged(first)) != (second.out.health, _judged(second)):
            changed.append((case.name, sorted(_judged(first) ^ _judged(second))))
    assert len(fixture_dirs()) > 100 and not changed, changed


def test_the_events_kept_of_a_kind_are_its_newest_whatever_file_was_read_last():
    """An env error is logged by the orchestrator and again by the env server; the files are read
    one after the other. The kept events are the newest by time (those of the file read last are
    not: the two files' lines alternate in time), in time order."""
    start = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)

    def events(file: str, first_second: int) -> list[LogEvent]:
        return [
            LogEvent(
                file=file,
                line=i + 1,
                time=start + timedelta(seconds=first_second + 2 * i),
                level="WARNING",
                message=f"{file} {i}",
                kind="env_error",
            )
            for i in range(EVENTS_PER_KIND)
        ]

    orchestrator = events("logs/orchestrator.log", 1)  # read first: at 1, 3, ... 99 s
    server = events("logs/envs/train/reverse-text/env_worker_0.log", 0)  # read last: at 0, 2, ... 98 s
    kept = _bounded_events(orchestrator + server)
    newest = sorted(orchestrator + server, key=lambda e: e.time)[-EVENTS_PER_KIND:]
    assert kept == newest
    assert kept[-1].file == "logs/orchestrator.log"


def test_a_line_with_no_time_of_its_own_is_as_new_as_the_dated_line_before_it():
    """torchrun's stderr after a `Fatal error` has no time: it is kept with the crash it follows,
    not dropped as the oldest crash line because it has no time of its own."""
    start = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
    older = [
        LogEvent(
            file="logs/attempt_1/trainer.log",
            line=i + 1,
            time=start + timedelta(seconds=i),
            level="ERROR",
            message="x",
            kind="crash",
        )
        for i in range(EVENTS_PER_KIND)
    ]
    fatal = LogEvent(
        file="logs/attempt_2/trainer.log",
        line=7,
        time=start + timedelta(hours=1),
        level="ERROR",
        message="Fatal error in train",
        kind="crash",
    )
    child = LogEvent(file="logs/attempt_2/trainer.log", line=9, level="STDERR", message="ChildFailedError:", kind="crash")
    kept = _bounded_events([*older, fatal, child])
    assert fatal in kept and child in kept and len(kept) == EVENTS_PER_KIND
    assert older[0] not in kept and older[1] not in kept
