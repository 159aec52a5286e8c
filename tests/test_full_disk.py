"""A full file system, for real: a small tmpfs holds the run (STATUS.md) or the state home.

Mounting needs root, which CI has (the tests run as root there); elsewhere these tests are skipped
with that reason. What must hold: the check-in never reports a failure as a success (exit status
1 or 2 and one line on stderr, never a traceback), STATUS.md never keeps half an entry, an entry
that could not be written is appended at the next check-in once there is room, in order, and the
state store passes `PRAGMA integrity_check` afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from crashkit import entry_problems, integrity, parse_status, stored
from faultkit import can_mount_tmpfs, fill, small_tmpfs
from runbuilder import HRun

pytestmark = pytest.mark.skipif(not can_mount_tmpfs(), reason="needs root to mount a small tmpfs (CI runs the tests as root)")


def check(run: HRun, home, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlagent", "check", str(run.dir), "--offline", "--llm", "off", *extra],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RLAGENT_HOME": str(home)},
    )


def error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip() and "Deserializing unregistered type" not in line]
    assert len(lines) == 1, stderr
    return lines[0]


def pad_to_page_end(path, room: int = 400) -> None:
    """Leave `room` bytes before STATUS.md's next page: the next entry straddles a page that a
    full tmpfs cannot give, so its write comes back short (the fault as found: half an entry)."""
    size = path.stat().st_size
    with open(path, "a") as f:
        f.write("(notes by hand) " + "." * ((4096 - room - size - 17) % 4096) + "\n")


@pytest.mark.parametrize("room", [400, 0])
def test_status_md_on_a_full_disk_is_never_half_written_and_is_caught_up(tmp_path, room):
    with small_tmpfs("2m") as mount:
        run = HRun(mount)
        run.steps(10)
        home = tmp_path / "home"
        assert check(run, home).returncode == 0
        pad_to_page_end(run.dir / "STATUS.md", room)
        run.steps(3)
        before = (run.dir / "STATUS.md").read_bytes()
        filler = fill(mount)

        failed = check(run, home, "--json")
        assert failed.returncode == 1
        line = error_line(failed.stderr)
        assert line.startswith("rlagent: error: check-in #2: STATUS.md could not be written: No space left on device")
        report = json.loads(failed.stdout)
        assert report["written"] is False and "appended next time" in report["write_error"]
        assert (run.dir / "STATUS.md").read_bytes() == before  # no stub, no half entry
        assert not (run.dir / ".STATUS.md.appending").exists()

        filler.unlink()
        run.steps(2)
        caught_up = check(run, home)
        assert caught_up.returncode == 0, caught_up.stderr
        entries, tail = parse_status((run.dir / "STATUS.md").read_text())
        saved, key = stored(run.dir, home)
        assert saved == 3 and [e.checkin for e in entries if e.key == key] == [0, 1, 2, 3]
        assert entry_problems(entries, tail, key, saved) == []
        assert integrity(home) == ["ok"]


def test_a_full_state_home_is_one_error_line_and_status_md_untouched(tmp_path):
    run = HRun(tmp_path)
    run.steps(10)
    with small_tmpfs("2m") as mount:
        home = mount / "home"
        assert check(run, home).returncode == 0
        before = (run.dir / "STATUS.md").read_bytes()
        run.steps(40)
        filler = fill(mount)

        failed = check(run, home)
        assert failed.returncode == 2
        line = error_line(failed.stderr)
        assert line.startswith("rlagent: error: state store ") and ("disk" in line or "full" in line), line
        status = (run.dir / "STATUS.md").read_bytes()
        # Untouched, or (had the store failed only when saving) one whole entry that the redo recognises.
        assert status == before or (status.startswith(before) and parse_status(status.decode())[1] == [])

        filler.unlink()
        run.steps(1)
        again = check(run, home)
        assert again.returncode == 0, again.stderr
        entries, tail = parse_status((run.dir / "STATUS.md").read_text())
        saved, key = stored(run.dir, home)
        assert saved == 2 and entry_problems(entries, tail, key, saved) == []
        assert integrity(home) == ["ok"]


def test_a_state_home_full_from_the_start_is_one_error_line(tmp_path):
    run = HRun(tmp_path)
    run.steps(5)
    with small_tmpfs("256k") as mount:
        fill(mount)
        failed = check(run, mount / "home")
        assert failed.returncode == 2
        assert error_line(failed.stderr).startswith("rlagent: error: state store ")
        assert not (run.dir / "STATUS.md").exists()


def test_both_full_at_once_then_freed(tmp_path):
    """The run dir and the state home on one full file system."""
    with small_tmpfs("3m") as mount:
        run = HRun(mount)
        run.steps(10)
        home = mount / "home"
        assert check(run, home).returncode == 0
        run.steps(5)
        filler = fill(mount)
        failed = check(run, home)
        assert failed.returncode in (1, 2)
        error_line(failed.stderr)
        assert parse_status((run.dir / "STATUS.md").read_text(errors="replace"))[1] == []
        filler.unlink()
        run.steps(1)
        assert check(run, home).returncode == 0
        entries, tail = parse_status((run.dir / "STATUS.md").read_text())
        saved, key = stored(run.dir, home)
        assert entry_problems(entries, tail, key, saved) == []
        assert integrity(home) == ["ok"]
        shutil.rmtree(home)
