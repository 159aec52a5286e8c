"""Crash injection: check-ins SIGKILLed at random moments and exactly around the STATUS.md append
(before it, halfway through its write, between it and the checkpoint, after the checkpoint), on a
run that keeps changing between attempts (new steps, warnings, a new `logs/attempt_N`), by
monitors of two state homes. After every kill, and at the end, STATUS.md holds no duplicated,
reordered or half-written entry, every check-in the store saved has its entry, a redone check-in
that saw more (a new attempt) is appended as a correction, and `PRAGMA integrity_check` of each
state store is `ok`.

The default suite runs a sample (CRASH_KILLS, 24 kills). The nightly size is
`RLAGENT_CRASH_KILLS=240 pytest tests/test_crash_injection.py` (or `make test-nightly`, which sets
RLAGENT_NIGHTLY=1 for every nightly-size suite).
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from crashkit import POINTS, Zygote, entry_problems, integrity, parse_status, stored
from runbuilder import HRun

CRASH_KILLS = 24
NIGHTLY_KILLS = 240


def kills_wanted() -> int:
    if os.environ.get("RLAGENT_CRASH_KILLS"):
        return int(os.environ["RLAGENT_CRASH_KILLS"])
    return NIGHTLY_KILLS if os.environ.get("RLAGENT_NIGHTLY") else CRASH_KILLS


def change(run: HRun, rng: random.Random) -> None:
    """The run moves on between two attempts of a check-in."""
    roll = rng.random()
    if roll < 0.12 and run.step > 3:
        run.new_attempt()
        run.step -= rng.randint(0, 3)
        run.log("trainer.log", "INFO", f"Resuming training from checkpoint step {run.step}")
    elif roll < 0.3:
        run.log("orchestrator.log", "WARNING", f"Rollout failed: TimeoutError: episode exceeded {rng.randint(5, 90)}s")
    # Always something new: an offline check-in that reads nothing new appends nothing, by design
    # (issue 11), and every check-in here must have an entry to lose or duplicate.
    run.steps(rng.randint(1, 3))


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    forker = Zygote(tmp_path_factory.mktemp("zygote") / "children.log")
    yield forker
    forker.close()


def status(run: HRun) -> str:
    """STATUS.md as text (a torn append may end mid-character until it is repaired)."""
    path = run.dir / "STATUS.md"
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def check_invariants(run: HRun, homes: list[Path], *, final: bool) -> None:
    entries, tail = parse_status(status(run))
    for home in homes:
        saved, key = stored(run.dir, home)
        problems = entry_problems(entries, tail if final else [], key, saved)
        assert not problems, f"{home.name}: {problems}"
    for home in homes:
        assert set(integrity(home)) <= {"ok"}, integrity(home)


def test_sigkill_at_random_moments_and_around_the_append_never_loses_or_duplicates(tmp_path, zygote):
    kills = kills_wanted()
    rng = random.Random(20261122 + kills)
    run = HRun(tmp_path)
    run.steps(6)
    homes = [tmp_path / "home-a", tmp_path / "home-b"]
    schedule = [POINTS[(i // 2) % len(POINTS)] if i % 2 == 0 else None for i in range(kills)]
    rng.shuffle(schedule)
    assert zygote.run(run.dir, homes[0], None, 1) == 0  # home A knows the run (and its attempt) before the kills
    run.steps(1)
    started = time.monotonic()
    assert zygote.run(run.dir, homes[0], None, 1) == 0
    # Random moments are drawn over what a child takes on this machine (start-up and one check-in),
    # so that a fast machine does not let most children finish before their moment comes.
    span = time.monotonic() - started
    started, killed = time.monotonic(), 0
    for point in schedule:
        change(run, rng)
        home = homes[0] if rng.random() < 0.8 else homes[1]
        if point is None:  # a random moment: anywhere in start-up, the reads, the rules, the append, the save
            # one check-in per child (a second one would read nothing new)
            code = zygote.run(run.dir, home, None, 1, kill_after=rng.uniform(0.0, span))
            assert code in (0, -signal.SIGKILL), zygote.tail()
        else:
            run.steps(1)  # something new to append, so the check-in reaches the append
            code = zygote.run(run.dir, home, point, 1)
            assert code == -signal.SIGKILL, f"{point}: the child was meant to die there, exit {code}\n{zygote.tail()}"
        killed += code == -signal.SIGKILL
        check_invariants(run, homes, final=False)
    # A last attempt of the run, then one clean check-in per home (a torn append is repaired by
    # the next append, of either home).
    run.new_attempt()
    run.steps(2)
    for home in homes:
        assert zygote.run(run.dir, home, None, 1) == 0
    check_invariants(run, homes, final=True)
    # A one-time note is never lost to a kill: the newest attempt is said by home A's entries.
    entries, _ = parse_status(status(run))
    key_a = stored(run.dir, homes[0])[1]
    said = "\n".join(e.text for e in entries if e.key == key_a)
    assert f"new attempt attempt_{run.attempt}" in said
    assert killed >= kills * 0.6, f"only {killed} of {kills} children died by SIGKILL"  # half are exact points
    took = time.monotonic() - started
    print(f"\ncrash injection: {killed} SIGKILLs of {kills} attempts in {took:.1f} s (a child takes {span * 1000:.0f} ms)")


@pytest.mark.parametrize("point", POINTS)
def test_each_exact_kill_point_then_a_changed_run_is_written_once_and_corrected(tmp_path, zygote, point):
    """Fault 1 at each point: a check-in killed there, redone after the run got a new attempt."""
    run = HRun(tmp_path)
    run.steps(8)
    home = tmp_path / "home"
    assert zygote.run(run.dir, home, None, 1) == 0
    run.steps(2)
    assert zygote.run(run.dir, home, point, 1) == -signal.SIGKILL
    run.new_attempt()
    run.step = 8
    run.steps(3)
    assert zygote.run(run.dir, home, None, 1) == 0
    entries, tail = parse_status(status(run))
    saved, key = stored(run.dir, home)
    assert saved == (3 if point == "after_checkpoint" else 2)
    assert entry_problems(entries, tail, key, saved) == []
    assert "new attempt attempt_2" in status(run)
    assert integrity(home) == ["ok"]
