"""One regression test per fault of issue 12, each reproducing it as found (11b, control sequences
in untrusted text, is fixed on main by the shared sanitiser; its test is in test_injection.py).

1 a redone check-in whose content differs is appended as a correction, never dropped;
2 entry ids are unique across state homes, and a skipped append is never silent;
3 a held run lock is said (who, since when) and given up on after a bounded wait;
4 a FIFO where a file should be is a note, never a hang;
5 `logs/latest` pointing to itself is a note;
6 out-of-range metrics times and steps are a note, and the row is skipped;
7 a config nested 100,000 deep is a note;
8 unreadable directories are notes;
9 a short write of STATUS.md is truncated back, reported, and retried next check-in;
10 a state store that fails is one error line, never a traceback;
11a a launch line in the Launcher pane is only a guess, never approved (also test_injection.py).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlagent.agents.report import build_report
from rlagent.graph.runner import Monitor
from rlagent.graph.store import RunLocked, run_key, run_lock, state_dir
from rlagent.models.run import Health
from rlagent.tools import statusfile
from rlagent.tools.layout import discover_run

from conftest import loguru_line
from crashkit import entry_problems, parse_status
from faultkit import ROOT, bounded
from runbuilder import HRun


def monitor(run: HRun, home: Path, **kwargs) -> Monitor:
    return Monitor(discover_run(run.dir), home=home, offline=True, **kwargs)


def check(run: HRun, home: Path, **kwargs):
    mon = monitor(run, home, **kwargs)
    try:
        with bounded(30):
            return mon.check_in()
    finally:
        mon.close()


def cli(*args: str, home: Path, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {**os.environ, "RLAGENT_HOME": str(home), **(env or {})}
    return subprocess.run([sys.executable, "-m", "rlagent", *args], capture_output=True, text=True, timeout=timeout, env=environ)


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip() and "Deserializing unregistered type" not in line]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    return lines[0]


# --- 1 -----------------------------------------------------------------------------------------


def test_1_a_redo_after_the_run_changed_is_appended_as_a_correction_and_an_identical_one_is_not(tmp_path):
    run = HRun(tmp_path)
    run.steps(10)
    home = tmp_path / "home"
    check(run, home)
    run.steps(3)
    saved = tmp_path / "saved-home"
    shutil.copytree(home, saved)
    second = check(run, home)  # appended, then "killed" before its state was saved:
    assert second.out.written
    shutil.rmtree(home)
    shutil.copytree(saved, home)

    same = check(run, home)  # redone, nothing changed: the entry is already there, and it says so
    assert same.checkin == 2 and not same.out.written and "identical" in same.out.write_note
    assert build_report(same)["write_note"] == same.out.write_note
    shutil.rmtree(home)
    shutil.copytree(saved, home)

    run.new_attempt()  # redone after the run changed: a new attempt appeared in between
    run.step = 10
    run.log("trainer.log", "INFO", "Resuming training from checkpoint step 10")
    run.steps(2)
    redone = check(run, home)
    assert redone.checkin == 2 and redone.out.written
    entries, tail = parse_status(run.status())
    twos = [e for e in entries if e.checkin == 2]
    assert len(twos) == 2 and twos[0].digest != twos[1].digest
    assert "new attempt attempt_2" in twos[1].text and "This entry replaces check-in #2 above" in twos[1].text
    assert entry_problems(entries, tail, monitor(run, home).entry_key, 2) == []


# --- 2 -----------------------------------------------------------------------------------------


def test_2_a_second_state_home_writes_entries_of_its_own(tmp_path):
    run = HRun(tmp_path)
    run.steps(5)
    homes = [tmp_path / "home-a", tmp_path / "home-b"]
    written = []
    for _ in range(6):
        run.steps(2)
        for home in homes:
            written.append(check(run, home).out.written)
    assert all(written) and len(written) == 12
    entries, tail = parse_status(run.status())
    keys = {e.key for e in entries}
    assert len(keys) == 2 and all(key.startswith(run_key(str(run.dir))) for key in keys)
    assert len([e for e in entries if e.checkin > 0]) == 12 and tail == []

    # A wiped state dir starts again at #1 with a new id: its entries are written, not skipped.
    shutil.rmtree(homes[0])
    run.steps(2)
    fresh = check(run, homes[0])
    assert fresh.checkin == 1 and fresh.out.written


def test_2_a_skipped_append_is_said_on_stderr(tmp_path):
    run = HRun(tmp_path)
    run.steps(5)
    home = tmp_path / "home"
    assert cli("check", str(run.dir), "--offline", "--llm", "off", home=home).returncode == 0
    thread = state_dir(home, run_key(str(run.dir)))
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        (thread / name).unlink(missing_ok=True)  # the store forgets; its id (and STATUS.md) stay
    again = cli("check", str(run.dir), "--offline", "--llm", "off", home=home)
    assert again.returncode == 0
    assert one_error_line(again.stderr).startswith("rlagent: note: check-in #1 was redone") and "not appended" in again.stderr


# --- 3 -----------------------------------------------------------------------------------------


def test_3_a_held_lock_is_said_and_given_up_on(tmp_path):
    run = HRun(tmp_path)
    run.steps(5)
    home = tmp_path / "home"
    directory = state_dir(home, run_key(str(run.dir)))
    with run_lock(directory, doing="an earlier holder's longer description of what it was doing"):
        pass  # its record is overwritten in place by the next holder's shorter one, and its tail cut
    with run_lock(directory, doing="a stuck check-in"):
        started = time.monotonic()
        done = cli("check", str(run.dir), "--offline", "--llm", "off", home=home, env={"RLAGENT_LOCK_TIMEOUT": "2s"})
        waited = time.monotonic() - started
        with pytest.raises(RunLocked, match=f"pid {os.getpid()}"):
            monitor(run, home, lock_timeout_s=0.3).check_in()
    assert done.returncode == 2 and waited < 20, done
    assert "Traceback" not in done.stderr
    assert f"waiting up to 2 s for another rlagent on this run: pid {os.getpid()}" in done.stderr
    assert "a stuck check-in since" in done.stderr and "gave up after 2 s" in done.stderr
    assert check(run, home).out.written  # once free, the next check-in goes through


# --- 4, 5, 6, 7 --------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["metrics.jsonl", "configs/rl.json", "configs/trainer.json"])
def test_4_a_fifo_where_a_file_should_be_is_a_note_not_a_hang(tmp_path, where):
    run = HRun(tmp_path)
    run.steps(5)
    path = run.dir / where
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    state = check(run, tmp_path / "home")
    assert f"{where}: unreadable (a FIFO, not read)" in state.out.observation.notes
    assert state.out.written and state.out.observation.trainer_step == 5


@pytest.mark.parametrize("outside", ["elsewhere", "reverse-text-run-2"], ids=["elsewhere", "a sibling named like the run"])
def test_4_a_log_that_links_out_of_the_run_is_a_note_and_is_not_read(tmp_path, outside):
    """A symlink is followed only as far as the run dir: what it points to outside is not read,
    even in a sibling folder whose name starts with the run's (a prefix is not a parent)."""
    run = HRun(tmp_path)
    run.steps(5)
    secret = tmp_path / outside / "orchestrator.log"
    secret.parent.mkdir()
    secret.write_text(
        loguru_line("09:10:00", "WARNING", "a line from outside the run")
        + loguru_line("09:10:01", "SUCCESS", "Step 9 |   41.2s | Reward 0.9000 | Trainable 112/128 (87.5%)")
    )
    log = run.logs / "orchestrator.log"
    log.unlink()
    log.symlink_to(secret)
    state = check(run, tmp_path / "home")
    assert any("a link out of the run dir" in n for n in state.out.observation.notes)
    assert not any("outside the run" in e.message for e in state.memory.events)
    assert state.out.observation.orchestrator_step is None and state.out.observation.trainer_step == 5


def test_5_latest_pointing_to_itself_is_a_note(tmp_path):
    run = HRun(tmp_path)
    run.steps(5)
    latest = run.dir / "logs" / "latest"
    latest.unlink()
    latest.symlink_to("latest")
    state = check(run, tmp_path / "home")
    assert any("logs/latest cannot be followed" in n for n in state.out.observation.notes)
    assert state.out.observation.trainer_step == 5  # the newest attempt was read instead


@pytest.mark.parametrize("stamp", ["1e300", "1e12", "1e11", "-5"])
def test_6_an_out_of_range_metrics_time_is_a_note_and_the_row_is_skipped(tmp_path, stamp):
    run = HRun(tmp_path)
    run.steps(5)
    metrics = run.dir / "metrics.jsonl"
    metrics.write_text(f'{{"step": 3, "time": {stamp}, "loss/mean": 0.1}}\n{{"step": 1e300, "loss/mean": 0.1}}\n')
    home = tmp_path / "home"
    first = check(run, home)
    assert "metrics.jsonl: skipped 2 row(s) with an out-of-range step or time" in first.out.observation.notes
    assert first.out.observation.now.year == 2026 and first.out.written
    run.steps(1)  # the next check-ins are not held up by the row (it made `rlagent run` exit)
    if stamp == "1e300":
        done = cli("run", str(run.dir), "--offline", "--llm", "off", "--max-checks", "2", "--cadence", "1s", home=home)
        assert done.returncode == 0, done.stderr
    else:
        assert check(run, home).out.written


def test_7_a_config_nested_100000_deep_is_a_note(tmp_path):
    run = HRun(tmp_path)
    run.steps(5)
    (run.dir / "configs" / "rl.json").write_text("[" * 100_000)
    (run.dir / "configs" / "orchestrator.json").write_text('{"a": ' * 100_000)
    state = check(run, tmp_path / "home")
    assert "configs/rl.json: nested too deeply to read" in state.out.observation.notes
    assert state.memory.config.max_steps == 100  # trainer.json is still read


# --- 8 -----------------------------------------------------------------------------------------

UNREADABLE = ["logs", "logs/attempt_1", "configs", "checkpoints", "rollouts", "rollouts/step_5"]


@pytest.mark.parametrize("directory", UNREADABLE)
def test_8_an_unreadable_directory_is_a_note(tmp_path, directory):
    if ROOT and not shutil.which("setpriv"):
        pytest.skip("as root, setpriv is needed to drop the DAC capabilities")
    run = HRun(tmp_path)
    run.steps(5)
    (run.dir / "checkpoints" / "step_5" / "trainer").mkdir(parents=True)
    (run.dir / "rollouts" / "step_5" / "train" / "all").mkdir(parents=True)
    (run.dir / "rollouts" / "step_5" / "train" / "all" / "traces.jsonl").write_text("{}\n")
    target = run.dir / directory
    target.chmod(0)
    try:
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if ROOT else []
        done = subprocess.run(
            [*prefix, sys.executable, "-m", "rlagent", "check", str(run.dir), "--offline", "--llm", "off", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "RLAGENT_HOME": str(tmp_path / "home")},
        )
    finally:
        target.chmod(0o755)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    assert f"{directory}: unreadable (Permission denied)" in report["notes"], report["notes"]
    assert report["written"] and report["health"] == "Healthy"


# --- 9 -----------------------------------------------------------------------------------------


def test_9_a_short_write_is_truncated_back_reported_and_retried(tmp_path, monkeypatch):
    run = HRun(tmp_path)
    run.steps(5)
    home = tmp_path / "home"
    mon = monitor(run, home)
    mon.check_in()
    before = run.status()

    real_write = os.write

    def disk_full(fd, data):
        if len(data) > 200:
            return real_write(fd, data[: len(data) // 3])  # a short write, as on a full disk
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(statusfile.os, "write", disk_full)
    run.steps(2)
    failed = mon.check_in()
    assert run.status() == before  # the partial bytes are gone
    assert not failed.out.written and "No space left on device" in failed.out.write_error
    assert "1 entry will be appended next time" in failed.out.write_error
    assert [u.checkin for u in failed.memory.unwritten] == [2]
    assert build_report(failed)["write_error"] == failed.out.write_error
    run.steps(1)
    failed_again = mon.check_in()
    assert [u.checkin for u in failed_again.memory.unwritten] == [2, 3]

    monkeypatch.undo()
    run.steps(1)
    fine = mon.check_in()
    assert fine.out.written and fine.memory.unwritten == []
    entries, tail = parse_status(run.status())
    assert [e.checkin for e in entries] == [0, 1, 2, 3, 4] and tail == []
    assert entry_problems(entries, tail, mon.entry_key, 4) == []
    mon.close()


def test_9_a_failed_write_exits_non_zero_with_one_line(tmp_path):
    run = HRun(tmp_path)
    run.steps(5)
    (run.dir / "STATUS.md").mkdir()  # not a file rlagent can append to
    done = cli("check", str(run.dir), "--offline", "--llm", "off", "--json", home=tmp_path / "home")
    assert done.returncode == 1
    line = one_error_line(done.stderr)
    assert line.startswith("rlagent: error: check-in #1: STATUS.md could not be written")
    report = json.loads(done.stdout)
    assert report["written"] is False and report["write_error"]


def test_9_a_symlinked_or_hard_linked_status_file_is_not_written_through(tmp_path):
    run = HRun(tmp_path)
    run.steps(5)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not rlagent's\n")
    (run.dir / "STATUS.md").symlink_to(elsewhere)
    state = check(run, tmp_path / "home")
    assert not state.out.written and elsewhere.read_text() == "not rlagent's\n"
    assert "a symbolic link" in state.out.write_error  # was O_NOFOLLOW's "Too many levels of symbolic links"
    (run.dir / "STATUS.md").unlink()
    os.link(elsewhere, run.dir / "STATUS.md")
    state = check(run, tmp_path / "home2")
    assert not state.out.written and "hard link" in state.out.write_error and elsewhere.read_text() == "not rlagent's\n"


# --- 10 ----------------------------------------------------------------------------------------


def test_10_a_failing_state_store_is_one_error_line(tmp_path, monkeypatch, capsys):
    import sqlite3

    from rlagent import cli as cli_module
    from rlagent.graph import runner

    run = HRun(tmp_path)
    run.steps(5)

    def failing(db_path):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(runner, "connect", failing)
    monkeypatch.setattr(sys, "argv", ["rlagent", "check", str(run.dir), "--offline", "--llm", "off"])
    with pytest.raises(SystemExit) as exit_:
        cli_module.main()
    assert exit_.value.code == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("rlagent: error: state store ") and "disk I/O error" in line
    assert not (run.dir / "STATUS.md").exists()


def test_health_stays_healthy_through_all_of_it(tmp_path):
    """The notes above are notes: a healthy run with every fault at once is still Healthy."""
    run = HRun(tmp_path)
    run.steps(12)
    os.mkfifo(run.dir / "metrics.jsonl")
    (run.dir / "configs" / "rl.json").write_text("[" * 100_000)
    (run.dir / "logs" / "attempt_1" / "evals.log").symlink_to("evals.log")
    state = check(run, tmp_path / "home")
    assert state.out.health is Health.HEALTHY and state.out.written
