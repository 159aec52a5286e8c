"""A log rotated between two check-ins (logrotate's default `create` mode, Python's
RotatingFileHandler: the file renamed to `<name>.1`, a new one made under its name) loses nothing:
what was written to it after the last check-in is read from the renamed file, the new file is read
as its sequel, and what was read before the rotation is kept.

Each case is a fixture's run (simulated) read two ways on real files: whole, by one check-in, and
grown in pieces with its main logs rotated between two check-ins. Both must know the same steps
with the same metrics, the same warnings and the same events."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

from rlagent.evals.fixture import FIXTURES
from rlagent.graph.runner import Monitor
from rlagent.models.observation import FileCursor
from rlagent.tools.adapters import discover
from rlagent.tools.rotation import rotated_away
from rlagent.tools.tail import head_hash

CASES = {  # fixture: the logs rotated
    "02_healthy-l": ("logs/trainer.log", "logs/orchestrator.log"),
    "08_healthy-h-noisy": ("logs/attempt_1/orchestrator.log", "logs/attempt_1/trainer.log"),
    "84_verl-healthy": ("verl_demo.log",),
    "100_trl-healthy": ("train.log",),
    "116_openrlhf-healthy": ("train.log",),
}


def _copy(case: str, to: Path) -> Path:
    shutil.copytree(FIXTURES / case / "run", to, symlinks=True, copy_function=shutil.copy2)
    return to


def _known(state) -> tuple:
    """What a check-in knows of a run: its steps with their metrics, its warnings, its events per step."""
    memory = state.memory
    history = {process: dict(memory.history.table(process)) for process in ("trainer", "orchestrator")}
    groups = Counter()
    for group in memory.groups.values():
        groups[(group.level, group.template)] += group.count
    events = Counter()
    for counts in memory.history.event_counts.values():
        for kind, steps in counts.items():
            for step, n in steps.items():
                events[(kind, step)] += n
    return history, groups, events


def _write(path: Path, lines: list[bytes], mtime: float) -> None:
    with open(path, "ab") as f:
        f.write(b"".join(lines))
    os.utime(path, (mtime, mtime))


@pytest.mark.parametrize("case", CASES)
def test_a_log_rotated_between_check_ins_loses_nothing(case, tmp_path):
    whole = Monitor(discover(_copy(case, tmp_path / "whole")), home=tmp_path / "home-whole", offline=True)
    try:
        expected = _known(whole.check_in())
    finally:
        whole.close()

    run = _copy(case, tmp_path / "pieces")
    parts = {}
    for rel in CASES[case]:
        path = run / rel
        lines, mtime = path.read_bytes().splitlines(keepends=True), path.stat().st_mtime
        assert len(lines) > 20, rel
        parts[rel] = (lines, mtime)
        path.unlink()
        _write(path, lines[: len(lines) * 2 // 5], mtime)
    # Layout H's metrics.jsonl comes whole at the second check-in: its rows are read after the logs'
    # step lines and outrank their rounded figures, as in the whole read.
    metrics = run / "metrics.jsonl"
    if metrics.exists():
        metrics.rename(tmp_path / "metrics.jsonl")
    monitor = Monitor(discover(run), home=tmp_path / "home-pieces", offline=True)
    try:
        monitor.check_in()
        if (tmp_path / "metrics.jsonl").exists():
            (tmp_path / "metrics.jsonl").rename(metrics)
        for rel, (lines, mtime) in parts.items():
            path = run / rel
            _write(path, lines[len(lines) * 2 // 5 : len(lines) * 7 // 10], mtime)  # written after the check-in...
            path.rename(path.with_name(path.name + ".1"))  # ...then rotated
            _write(path, lines[len(lines) * 7 // 10 :], mtime)
        after = monitor.check_in()
        again = monitor.check_in()
    finally:
        monitor.close()

    assert _known(after) == expected
    notes = after.out.observation.notes
    for rel in CASES[case]:
        assert f"{rel} was rotated to {rel}.1 since the last check-in; its rest read there, the new {rel} from its start" in notes
    assert again.out.observation.bytes_read == 0 and _known(again) == expected  # the new file is not read twice


def _cursor_of(path: Path) -> FileCursor:
    st = path.stat()
    size = st.st_size
    return FileCursor(path=path.name, dev=st.st_dev, inode=st.st_ino, offset=size, size=size, head=head_hash(path, size))


def test_the_renamed_file_is_found_by_its_identity_not_its_name(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("{'loss': 0.1}\n")  # shorter than the bytes a cursor hashes
    cursor = _cursor_of(log)
    assert rotated_away(log, "train.log", cursor) is None  # not rotated
    with open(log, "a") as f:
        f.write("{'loss': 0.2}\n")
    assert rotated_away(log, "train.log", cursor) is None  # grown, not rotated

    (tmp_path / "train.log.1").write_text("{'loss': 0.1}\n")  # a copy, not the file read
    (tmp_path / "train.log.2").symlink_to(log)  # a link to it: the file read is still `train.log`
    log.rename(tmp_path / "train.log1")  # not a rotated name
    log.write_text("{'loss': 0.3}\n")
    assert rotated_away(log, "train.log", cursor) is None
    (tmp_path / "train.log1").rename(tmp_path / "train.log-20261127")
    assert rotated_away(log, "train.log", cursor) == (tmp_path / "train.log-20261127", "train.log-20261127")
    log.unlink()  # renamed, the new file not made yet: still found
    assert rotated_away(log, "logs/train.log", cursor) == (tmp_path / "train.log-20261127", "logs/train.log-20261127")

    (tmp_path / "train.log-20261127").write_text("{'loss': 9.9}\n")  # rewritten in place: no longer the file read
    assert rotated_away(log, "train.log", cursor) is None
