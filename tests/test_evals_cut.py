"""The cutter: a recorded run presented as it was at time t, grown forward by appending.

What could break: a record split from its continuation lines, a file appearing before its
time, mtimes that the monitor would date wrongly, a grown copy that differs from a fresh cut
(then incremental reading in a replay is not what a live run sees), rotation and symlinks."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from rlagent.evals.cut import RecordedRun, WorkingCopy, cut
from rlagent.evals.fixture import FIXTURES, load_fixture
from rlagent.evals.manifest import LinkState, build_manifest
from rlagent.tools.dayclock import date_points
from rlagent.tools.untrusted import strip_controls

from conftest import loguru_line

UTC_TZ = ZoneInfo("UTC")
T0 = datetime(2026, 11, 20, 23, 59, 50, tzinfo=UTC)


def at(seconds: float) -> float:
    return (T0 + timedelta(seconds=seconds)).timestamp()


def line(seconds: float, level: str, message: str, detail: str = "") -> str:
    return loguru_line((T0 + timedelta(seconds=seconds)).strftime("%H:%M:%S"), level, message) + detail


def write(path: Path, text: str | bytes, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    os.utime(path, (mtime, mtime))


@pytest.fixture
def recorded(tmp_path) -> RecordedRun:
    """A small H-like run crossing midnight: a traceback, a rotated log, rows, a checkpoint."""
    run = tmp_path / "run"
    traceback = 'Traceback (most recent call last):\n  File "train.py", line 3\nRuntimeError: boom\n'
    write(
        run / "logs/attempt_1/trainer.log",
        line(0, "INFO", "Starting")
        + line(5, "ERROR", "Fatal error in train", traceback)
        + line(12, "SUCCESS", "Step 1 | 10.0s | Loss 0.1")
        + line(20, "SUCCESS", "Step 2 | 8.0s | Loss 0.1"),
        at(20),
    )
    write(run / "logs/attempt_1/old.log.1", line(1, "INFO", "a") + line(8, "INFO", "b"), at(8))
    write(run / "logs/attempt_1/old.log", line(9, "INFO", "c") + line(15, "INFO", "d"), at(15))
    rows = [{"step": 1, "time": at(12.5)}, {"step": 1, "time": at(12.6)}, {"step": 2, "time": at(20.5)}]
    text = json.dumps(rows[0]) + "\n" + json.dumps(rows[1]) + "\n" + '{"step": 2, "ti\n' + json.dumps(rows[2]) + "\n"
    write(run / "metrics.jsonl", text, at(20.5))
    write(run / "checkpoints/step_1/trainer/.metadata", b"x", at(13))
    os.symlink("attempt_2", run / "logs/latest")
    (run / "logs/attempt_2").mkdir()
    write(run / "logs/attempt_2/trainer.log", line(30, "INFO", "Resuming training from checkpoint step 1"), at(30))
    manifest = build_manifest(
        run,
        symlinks={
            "logs/latest": [LinkState(at=T0, target="attempt_1"), LinkState(at=T0 + timedelta(seconds=29), target="attempt_2")]
        },
        renames={"logs/attempt_1/old.log.1": ("logs/attempt_1/old.log", T0 + timedelta(seconds=8.5))},
    )
    return RecordedRun(run, manifest, UTC_TZ)


def tree(root: Path) -> dict[str, tuple]:
    """Every file's bytes and mtime, every symlink's target."""
    out: dict[str, tuple] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_file():
            out[rel] = (path.read_bytes(), path.stat().st_mtime)
    return out


def test_a_record_and_its_continuation_lines_appear_together(recorded, tmp_path):
    copy = cut(recorded, tmp_path / "w", at(6))
    text = (copy.root / "logs/attempt_1/trainer.log").read_text()
    assert text.endswith("RuntimeError: boom\n") and "Fatal error in train" in text and "Step 1" not in text
    assert not (copy.root / "logs/attempt_1/trainer.log").read_text().startswith("Traceback")
    copy.grow(at(12))
    assert "Step 1" in (copy.root / "logs/attempt_1/trainer.log").read_text()


def test_files_appear_only_once_written_and_carry_the_time_of_their_last_line(recorded, tmp_path):
    copy = cut(recorded, tmp_path / "w", at(4))
    trainer = copy.root / "logs/attempt_1/trainer.log"
    assert trainer.stat().st_mtime == at(0)
    assert not (copy.root / "checkpoints").exists() and not (copy.root / "metrics.jsonl").exists()
    copy.grow(at(13))
    assert trainer.stat().st_mtime == at(12)
    assert (copy.root / "checkpoints/step_1/trainer/.metadata").stat().st_mtime == at(13)
    rows = (copy.root / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["time"] for r in rows[:2]] == [at(12.5), at(12.6)] and rows[2] == '{"step": 2, "ti'
    assert (copy.root / "metrics.jsonl").stat().st_mtime == at(12.6)


def test_a_torn_jsonl_row_goes_with_the_row_above_it(recorded, tmp_path):
    copy = cut(recorded, tmp_path / "w", at(20))
    assert (copy.root / "metrics.jsonl").read_text().endswith('{"step": 2, "ti\n')
    copy.grow(at(21))
    assert (copy.root / "metrics.jsonl").read_text().count("\n") == 4


def test_lines_are_dated_across_midnight_like_the_monitor_dates_them(recorded, tmp_path):
    # T0 is 23:59:50: the step line at +12 s reads 00:00:02 and belongs to the next day.
    copy = cut(recorded, tmp_path / "w", at(11))
    assert "Step 1" not in (copy.root / "logs/attempt_1/trainer.log").read_text()
    points = [(1, 23 * 3600 + 59 * 60 + 50), (2, 2)]
    dates = date_points(points, previous=None, mtime=at(12), tz=UTC_TZ)
    assert dates[2].timestamp() == at(12)


def test_a_rotated_log_lives_under_its_old_name_until_the_rotation(recorded, tmp_path):
    copy = cut(recorded, tmp_path / "w", at(8))
    assert (copy.root / "logs/attempt_1/old.log").read_text().count("\n") == 2
    assert not (copy.root / "logs/attempt_1/old.log.1").exists()
    inode = (copy.root / "logs/attempt_1/old.log").stat().st_ino
    copy.grow(at(9))
    assert (copy.root / "logs/attempt_1/old.log.1").stat().st_ino == inode  # renamed, not rewritten
    current = strip_controls((copy.root / "logs/attempt_1/old.log").read_text()).split()
    assert "c" in current and "a" not in current


def test_symlinks_follow_their_history(recorded, tmp_path):
    copy = cut(recorded, tmp_path / "w", at(5))
    assert os.readlink(copy.root / "logs/latest") == "attempt_1"
    copy.grow(at(29.5))
    assert os.readlink(copy.root / "logs/latest") == "attempt_2"
    assert (copy.root / "logs/attempt_2").is_dir() and not (copy.root / "logs/attempt_2/trainer.log").exists()


def test_a_copy_never_goes_back_in_time(recorded, tmp_path):
    copy = cut(recorded, tmp_path / "w", at(10))
    with pytest.raises(ValueError):
        copy.grow(at(9))


def test_grown_equals_cut_on_the_synthetic_run(recorded, tmp_path):
    moments = [at(s) for s in (-1, 0, 5, 8.4, 8.6, 12, 12.55, 20, 29, 29.5, 30, 60)]
    grown = WorkingCopy(recorded, tmp_path / "grown")
    for i, t in enumerate(moments):
        grown.grow(t)
        assert tree(grown.root) == tree(cut(recorded, tmp_path / f"fresh{i}", t).root), i


@pytest.mark.parametrize("name", ["10_healthy-l-rotated-junk", "21_crash-oom-h-resumed", "11_healthy-h-dirty-bytes"])
def test_grown_equals_cut_on_messy_fixtures(name, tmp_path):
    """Rotation, binary junk, a truncated last line, a torn row, attempt_2 and its symlink."""
    fixture = load_fixture(FIXTURES / name)
    run = RecordedRun(fixture.run_dir, fixture.manifest, ZoneInfo(fixture.case.log_timezone))
    span = run.end - run.start
    moments = [run.start - 1, *(run.start + span * k / 7 for k in range(1, 7)), run.end]
    for state in fixture.manifest.symlinks.get("logs/latest", [])[1:]:
        switch = state.at.timestamp()
        moments = sorted([*moments, switch - 0.5, switch, switch + 0.5])
    grown = WorkingCopy(run, tmp_path / "grown")
    for i, t in enumerate(moments):
        grown.grow(t)
        fresh = cut(run, tmp_path / f"fresh{i}", t)
        assert tree(grown.root) == tree(fresh.root), f"{name} at {datetime.fromtimestamp(t, UTC)}"
    assert {k: v[0] for k, v in tree(grown.root).items() if v[0] != "link"} == {
        k: v[0] for k, v in tree(fixture.run_dir).items() if v[0] != "link"
    }


def test_the_whole_recording_ends_with_every_recorded_mtime(tmp_path):
    fixture = load_fixture(FIXTURES / "21_crash-oom-h-resumed")
    run = RecordedRun(fixture.run_dir, fixture.manifest, ZoneInfo(fixture.case.log_timezone))
    copy = cut(run, tmp_path / "w", run.end)
    for rel, entry in fixture.manifest.files.items():
        if entry.kind == "file":
            assert (copy.root / rel).stat().st_mtime == pytest.approx(entry.mtime.timestamp(), abs=1e-6)
        else:  # logs carry whole seconds, rows their own time: never later than the recording
            assert (copy.root / rel).stat().st_mtime <= entry.mtime.timestamp() + 1e-6
