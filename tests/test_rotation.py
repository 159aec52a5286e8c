"""A log rotated between two check-ins (logrotate's default `create` mode, Python's
RotatingFileHandler: the file renamed to `<name>.1`, a new one made under its name; logrotate's
`copytruncate`: the file copied to `<name>.1` and cut to nothing) loses nothing:
what was written to it after the last check-in is read from the renamed file, the new file is read
as its sequel, and what was read before the rotation is kept.

Each case is a fixture's run (simulated) read two ways on real files: whole, by one check-in, and
grown in pieces with its main logs rotated between two check-ins. Both must know the same steps
with the same metrics, the same warnings and the same events."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from datetime import UTC
from pathlib import Path

import pytest

from rlagent.evals.fixture import FIXTURES
from rlagent.graph.runner import Monitor
from rlagent.models.observation import FileCursor
from rlagent.tools.adapters import discover, lineblocks
from rlagent.tools.evidence import line_at
from rlagent.tools.loglines import RANK_PREFIX
from rlagent.tools.logread import read_log
from rlagent.tools.rotation import (
    MAX_GENERATIONS,
    later_generations,
    older_generations,
    read_older,
    rotated_away,
    shifted_generations,
)
from rlagent.tools.tail import head_hash
from rlagent.tools.untrusted import strip_controls

CASES = {  # fixture: the logs rotated
    "02_healthy-l": ("logs/trainer.log", "logs/orchestrator.log"),
    "08_healthy-h-noisy": ("logs/attempt_1/orchestrator.log", "logs/attempt_1/trainer.log"),
    "84_verl-healthy": ("verl_demo.log",),
    "100_trl-healthy": ("train.log",),
    "118_openrlhf-alarming-normal": ("train.log",),
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


def _cited_where_they_are(run: Path, state) -> None:
    """Every kept event, and every warning group's first and last, cites the file and line it is on
    now: one read before the rotation is in the renamed or copied file, at the same number."""
    memory = state.memory
    cited = [*memory.events, *(g.first for g in memory.groups.values()), *(g.last for g in memory.groups.values())]
    assert cited
    for event in cited:
        line = line_at(run / event.file, event.line)
        said = RANK_PREFIX.sub("", event.message)[:40]  # what line_at gives has no `[rank0]:`
        assert line is not None and said in strip_controls(line), (event.file, event.line, event.message, line)


def _whole(case: str, tmp_path: Path, tenths: int) -> tuple:
    """What one check-in knows of the run with the first `tenths` of each rotated log's lines."""
    run = _copy(case, tmp_path / f"whole-{tenths}")
    for rel in CASES[case]:
        path = run / rel
        lines, mtime = path.read_bytes().splitlines(keepends=True), path.stat().st_mtime
        path.unlink()
        _write(path, lines[: len(lines) * tenths // 10], mtime)
    monitor = Monitor(discover(run), home=tmp_path / f"home-whole-{tenths}", offline=True)
    try:
        return _known(monitor.check_in())
    finally:
        monitor.close()


def _write(path: Path, lines: list[bytes], mtime: float) -> None:
    with open(path, "ab") as f:
        f.write(b"".join(lines))
    os.utime(path, (mtime, mtime))


def _in_pieces(case: str, run: Path) -> dict[str, tuple[list[bytes], float]]:
    """Cut each rotated log to its first 4 tenths; its lines and mtime, to write on with."""
    parts = {}
    for rel in CASES[case]:
        path = run / rel
        lines, mtime = path.read_bytes().splitlines(keepends=True), path.stat().st_mtime
        assert len(lines) > 20, rel
        parts[rel] = (lines, mtime)
        path.unlink()
        _write(path, lines[: len(lines) * 2 // 5], mtime)
    return parts


def _monitor_of_pieces(case: str, tmp_path: Path) -> tuple[Path, dict, Monitor]:
    """A copy of the case's run with its rotated logs cut to 4 tenths (_in_pieces), and a monitor of it."""
    run = _copy(case, tmp_path / "pieces")
    parts = _in_pieces(case, run)
    return run, parts, Monitor(discover(run), home=tmp_path / "home-pieces", offline=True)


def _rotate_after(run: Path, parts: dict, how: str, start: int, end: int, rest: int) -> None:
    """Append the lines from `start` to `end` tenths to each log, rotate it, then write on to `rest`."""
    for rel, (lines, mtime) in parts.items():
        path, at = run / rel, [len(lines) * x // 10 for x in (start, end, rest)]
        _write(path, lines[at[0] : at[1]], mtime)  # written after the check-in, then rotated
        older = sorted(path.parent.glob(f"{path.name}.*"), key=lambda p: -int(p.suffix[1:]))
        for generation in older:  # logrotate: the oldest moves first (`.2` to `.3`, then `.1` to `.2`)
            generation.rename(path.with_name(f"{path.name}.{int(generation.suffix[1:]) + 1}"))
        if how == "renamed":
            path.rename(path.with_name(path.name + ".1"))
        else:
            shutil.copy2(path, path.with_name(path.name + ".1"))
            os.truncate(path, 0)
        _write(path, lines[at[1] : at[2]], mtime)


@pytest.mark.parametrize("how", ["renamed", "copied and truncated"])
@pytest.mark.parametrize("case", CASES)
def test_a_log_rotated_between_check_ins_loses_nothing(case, how, tmp_path):
    expected = _whole(case, tmp_path, 10)
    run, parts, monitor = _monitor_of_pieces(case, tmp_path)
    try:
        monitor.check_in()
        _rotate_after(run, parts, how, 4, 6, 8)
        after = monitor.check_in()
        _cited_where_they_are(run, after)
        _rotate_after(run, parts, how, 8, 9, 10)  # a second rotation: the first rest is in `.2` now
        again = monitor.check_in()
        _cited_where_they_are(run, again)
        idle = monitor.check_in()
    finally:
        monitor.close()

    assert _known(after) == _whole(case, tmp_path, 8) and _known(again) == expected
    notes = after.out.observation.notes
    verb = "rotated" if how == "renamed" else "copied"
    for rel in CASES[case]:
        assert f"{rel} was {verb} to {rel}.1 since the last check-in; its rest read there, the new {rel} from its start" in notes
    assert idle.out.observation.bytes_read == 0 and _known(idle) == expected  # the new file is not read twice


@pytest.mark.parametrize("how", ["renamed", "copied and truncated"])
@pytest.mark.parametrize("case", CASES)
def test_a_log_rotated_twice_between_check_ins_loses_nothing(case, how, tmp_path):
    """The file read is `.2` at the next check-in; `.1`, rotated out in between, was never read:
    it is read whole after the rest of `.2`, before the new file."""
    run, parts, monitor = _monitor_of_pieces(case, tmp_path)
    try:
        monitor.check_in()
        _rotate_after(run, parts, how, 4, 5, 6)
        _rotate_after(run, parts, how, 6, 7, 8)
        after = monitor.check_in()
        idle = monitor.check_in()
    finally:
        monitor.close()

    assert _known(after) == _whole(case, tmp_path, 8)
    _cited_where_they_are(run, after)
    verb = "rotated" if how == "renamed" else "copied"
    for rel in CASES[case]:
        note = f"{rel} was {verb} to {rel}.2 since the last check-in; its rest read there, then {rel}.1 (rotated out since) whole"
        assert f"{note}, the new {rel} from its start" in after.out.observation.notes
    assert idle.out.observation.bytes_read == 0 and _known(idle) == _known(after)


@pytest.mark.parametrize("naming", ["numbered", "dated"])
@pytest.mark.parametrize("case", CASES)
def test_a_first_check_in_reads_a_log_s_rotated_generations_before_it(case, naming, tmp_path):
    """Attached to a run whose logs were rotated twice, a check-in knows what one that read the log
    whole knows: the generations are read oldest first, the log as their sequel."""
    expected = _whole(case, tmp_path, 10)
    run = _copy(case, tmp_path / "rotated")
    for rel in CASES[case]:
        path = run / rel
        lines, mtime = path.read_bytes().splitlines(keepends=True), path.stat().st_mtime
        path.unlink()
        older = ("2", "1") if naming == "numbered" else ("20261126", "20261127")
        separator = "." if naming == "numbered" else "-"
        at = [len(lines) * x // 10 for x in (0, 3, 6, 10)]
        for suffix, start, end in zip(older, at, at[1:], strict=False):
            _write(path.with_name(f"{path.name}{separator}{suffix}"), lines[start:end], mtime)
        _write(path, lines[at[2] :], mtime)
    monitor = Monitor(discover(run), home=tmp_path / "home-rotated", offline=True)
    try:
        first, idle = monitor.check_in(), monitor.check_in()
    finally:
        monitor.close()

    assert _known(first) == expected
    _cited_where_they_are(run, first)
    for rel in CASES[case]:
        names = ", ".join(f"{rel}{separator}{suffix}" for suffix in older)
        assert (
            f"{rel}: first read from its rotated generations on, oldest first ({names}), then itself"
            in first.out.observation.notes
        )
    assert idle.out.observation.bytes_read == 0 and _known(idle) == expected


@pytest.mark.parametrize("case", CASES)
def test_a_log_renamed_and_made_again_only_after_a_check_in_loses_nothing(case, tmp_path):
    """A check-in between the rename and the new file's first line (RotatingFileHandler makes it at
    its next record, logrotate's `nocreate` never): the rest is read from the renamed file then, and
    the new file, when it comes, is read as its sequel, not as a first read of a run with history."""
    expected = _whole(case, tmp_path, 10)
    run, parts, monitor = _monitor_of_pieces(case, tmp_path)
    try:
        monitor.check_in()
        for rel, (lines, mtime) in parts.items():
            path = run / rel
            _write(path, lines[len(lines) * 4 // 10 : len(lines) * 6 // 10], mtime)
            path.rename(path.with_name(path.name + ".1"))
        between, still = monitor.check_in(), monitor.check_in()
        for rel, (lines, mtime) in parts.items():
            _write(run / rel, lines[len(lines) * 6 // 10 :], mtime)
        after = monitor.check_in()
    finally:
        monitor.close()

    assert _known(between) == _known(still) == _whole(case, tmp_path, 6)
    assert _known(after) == expected
    _cited_where_they_are(run, after)


def test_a_generation_longer_than_a_check_in_can_read_is_said_to_be_read_in_part(tmp_path, monkeypatch):
    """TRL's console is read oldest first for at most READ_BUDGET_S a check-in: a generation read only
    in part says so, and the log itself is read on as its sequel (no generation is read twice)."""
    monkeypatch.setattr(lineblocks, "READ_BUDGET_S", 0.0)  # one block a read, then the budget is spent
    monkeypatch.setattr(lineblocks, "CHUNK", 4 << 10)
    run = _copy("100_trl-healthy", tmp_path / "run")
    log = run / "train.log"
    lines, mtime = log.read_bytes().splitlines(keepends=True), log.stat().st_mtime
    log.unlink()
    half = len(lines) // 2
    _write(log.with_name("train.log.1"), lines[:half], mtime)
    _write(log, lines[half:], mtime)
    assert log.with_name("train.log.1").stat().st_size > 4 << 10
    monitor = Monitor(discover(run), home=tmp_path / "home", offline=True)
    try:
        first, second = monitor.check_in(), monitor.check_in()
    finally:
        monitor.close()
    note = "train.log: first read from its rotated generations on, oldest first (train.log.1), then itself"
    assert f"{note}; train.log.1 read only in part, in the time a check-in reads" in first.out.observation.notes
    assert first.memory.cursors["train.log"].offset > 0  # the log itself was read, as the sequel
    assert not any("rotated generations" in n for n in second.out.observation.notes)


def test_a_run_whose_trainer_log_was_rotated_mid_collapse_is_judged_from_its_first_step(tmp_path):
    """SIMULATED fixture 35: logs/trainer.log rotated to trainer.log.1 after step 28, entropy
    collapsing from step 22. Read for the first time at its end, the early entropy is in `.1`."""
    run = _copy("35_entropy-collapse-l-rotated-junk", tmp_path / "run")
    monitor = Monitor(discover(run), home=tmp_path / "home", offline=True)
    try:
        state = monitor.check_in()
    finally:
        monitor.close()
    assert min(state.memory.history.trainer) == 1
    assert "entropy_collapse" in {f.id for f in state.out.findings}


def _cursor_of(path: Path) -> FileCursor:
    st = path.stat()
    size = st.st_size
    return FileCursor(path=path.name, dev=st.st_dev, inode=st.st_ino, offset=size, size=size, head=head_hash(path, size))


def _where(found) -> tuple[Path, str] | None:
    return None if found is None else found[:2]


def test_the_renamed_file_is_found_by_its_identity_not_its_name(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("{'loss': 0.1}\n")  # shorter than the bytes a cursor hashes
    cursor = _cursor_of(log)
    assert rotated_away(log, "train.log", cursor) is None  # not rotated
    with open(log, "a") as f:
        f.write("{'loss': 0.2}\n")
    assert rotated_away(log, "train.log", cursor) is None  # grown, not rotated

    (tmp_path / "train.log.1").write_text("{'loss': 0.1}\n")  # a copy of what was read, but the file read is still there
    (tmp_path / "train.log.2").symlink_to(log)  # a link to it
    log.rename(tmp_path / "train.log1")  # not a rotated name
    log.write_text("{'loss': 0.3}\n")
    assert rotated_away(log, "train.log", cursor) is None
    (tmp_path / "train.log1").rename(tmp_path / "train.log-20261127")
    found = rotated_away(log, "train.log", cursor)
    assert _where(found) == (tmp_path / "train.log-20261127", "train.log-20261127") and found[2] is cursor
    log.unlink()  # renamed, the new file not made yet: still found
    assert _where(rotated_away(log, "logs/train.log", cursor)) == (tmp_path / "train.log-20261127", "logs/train.log-20261127")

    (tmp_path / "train.log-20261127").write_text("{'loss': 9.9}\n")  # rewritten in place: no longer the file read
    assert rotated_away(log, "train.log", cursor) is None


def test_a_copy_made_before_the_log_was_cut_is_found_by_its_first_bytes(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("{'loss': 0.1}\n{'loss': 0.2}\n")
    cursor = _cursor_of(log)
    (tmp_path / "train.log.2").write_text("{'loss': 0.0}\n{'loss': 0.1}\n")  # an older generation: other first bytes
    os.truncate(log, 0)
    assert rotated_away(log, "train.log", cursor) is None  # cut, and no copy of it: read again from its start

    (tmp_path / "train.log.1").write_text("{'loss': 0.1}\n{'loss': 0.2}\n")  # copytruncate's copy
    log.write_text("{'loss': 0.3}\n{'loss': 0.4}\n{'loss': 0.5}\n")  # the process wrote on: past the cursor
    found = rotated_away(log, "train.log", cursor)
    copy = (tmp_path / "train.log.1").stat()
    assert _where(found) == (tmp_path / "train.log.1", "train.log.1")
    assert (found[2].inode, found[2].offset, found[2].head) == (copy.st_ino, cursor.offset, cursor.head)


def test_the_generations_rotated_out_after_the_file_read_are_found_by_name(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("now\n")
    for suffix in (".1", ".2", ".3", ".9", ".10", ".11", ".12", ".2.gz", ".bak", "-20261127"):
        (tmp_path / f"train.log{suffix}").write_text(suffix + "\n")
    (tmp_path / "train.log.4").symlink_to(log)  # a link is not a generation

    def names(moved: str) -> list[str]:
        return [g.rel for g in later_generations(log, "logs/train.log", tmp_path / moved)]

    # numbered: newer the lower, by value (not as text); a compressed or other-named file is none
    assert names("train.log.12") == [f"logs/train.log.{n}" for n in (11, 10, 9, 3, 2, 1)]
    assert names("train.log.1") == []  # one rotation: the common case
    for day in ("20261128", "20261130", "2026113"):
        (tmp_path / f"train.log-{day}").write_text(day + "\n")
    # dated: newer the later, among names of the same shape
    assert names("train.log-20261127") == ["logs/train.log-20261128", "logs/train.log-20261130"]


def test_a_first_read_goes_back_through_the_newest_generations_only(tmp_path):
    log = tmp_path / "train.log"
    for n in range(MAX_GENERATIONS + 3, 0, -1):  # .11 is the oldest
        (tmp_path / f"train.log.{n}").write_text(f"generation {n}\n")
    log.write_text("now\n")
    (tmp_path / "train.log-20261127").write_text("a stray dated copy\n")  # fewer: not the naming read
    assert [g.rel for g in older_generations(log, "train.log")] == [f"train.log.{n}" for n in range(MAX_GENERATIONS + 3, 0, -1)]

    reads, cursor, note = read_older(lambda path, rel, cursor: read_log(path, rel, cursor, UTC), log, "train.log")
    assert [r.rel for r in reads] == [f"train.log.{n}" for n in range(MAX_GENERATIONS, 0, -1)]
    assert [r.fresh for r in reads] == [True] + [False] * (MAX_GENERATIONS - 1)  # each the sequel of the one before
    assert cursor is not None and cursor.inode == log.stat().st_ino and cursor.offset == 0
    assert note.endswith("then itself; the 3 older not read")


def test_a_numbered_rotation_moves_the_cited_generations_on_oldest_first():
    cited = {"logs/t.log", "logs/t.log.1", "logs/t.log.3", "logs/t.log-20261127", "logs/t.log.1.gz"}
    assert shifted_generations("logs/t.log", "logs/t.log.2", cited) == [
        ("logs/t.log.3", "logs/t.log.5"),
        ("logs/t.log.1", "logs/t.log.3"),
    ]
    assert shifted_generations("logs/t.log", "logs/t.log-20261128", cited) == []  # dated names stay
