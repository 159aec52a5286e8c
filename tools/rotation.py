"""Reading on across a log rotation, so that the lines written between a check-in and the rotation
are not lost.

logrotate (its default `create` mode) and Python's RotatingFileHandler rename a log (`trainer.log`
to `trainer.log.1`, or `trainer.log-20261127` with `dateext`) and start a new file under the old
name; logrotate's `copytruncate` (for a process that keeps its file open, `python train.py >
train.log`) copies the log and cuts it to nothing. Either way the file a cursor read lives on beside
the log: its unread rest is read from the cursor there, and the log is read from its start as its
continuation (its line numbers from 1, the step and the date carried on), not as a rewrite of what
was read before. Rotated twice or more between two check-ins, the generations made since (`.1` when
the file read is `.2` now) are read whole in between, oldest first.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol, TypeVar

from rlagent.models.observation import FileCursor
from rlagent.tools.tail import head_hash

_SEPARATORS = ".-_"
"""What follows the log's name in a rotated name: `.1`, `-20261127`, `_2026-11-27`."""


class _Read(Protocol):  # a LogRead or a FileRead
    cursor: FileCursor | None
    notes: list[str]
    moved_from: str | None


R = TypeVar("R", bound=_Read)
Reader = Callable[[Path, str, FileCursor | None], R]


def rotated_away(path: Path, rel: str, cursor: FileCursor | None) -> tuple[Path, str, FileCursor] | None:
    """Where the file `cursor` read went (its path and run-relative name) and the cursor to read its
    rest there: renamed (a file beside it, named after it, is that very file: its device and inode)
    or copied before `path` was cut (`copytruncate`: `path` is shorter than the cursor or begins with
    other bytes, and a file beside it begins with the bytes the cursor hashed). Either is no shorter
    than the cursor; the newest if several are. None when `path` is still the file read, or when
    nothing beside it is what it was (tools.tail then reads it again from its start, and says so)."""
    if cursor is None or not cursor.inode:
        return None
    try:
        st = os.stat(path)
        copied = (st.st_dev, st.st_ino) == (cursor.dev, cursor.inode)
        if copied and (st.st_size, st.st_mtime_ns) == (cursor.size, cursor.mtime_ns):
            return None  # not changed since it was read: a quiet log costs this one stat
        if copied and st.st_size >= cursor.offset and (not cursor.head or head_hash(path, cursor.size) == cursor.head):
            return None  # grown
    except FileNotFoundError:
        copied = False  # renamed, its successor not made yet
    except (OSError, ValueError):
        return None  # the read of `path` says why
    if copied and not cursor.head:
        return None  # a copy is known by its first bytes only
    try:
        names = os.listdir(path.parent)
    except OSError:
        return None
    found: tuple[int, Path, str, os.stat_result] | None = None
    stem = path.name
    for name in names:
        if len(name) <= len(stem) or not name.startswith(stem) or name[len(stem)] not in _SEPARATORS:
            continue
        moved = path.parent / name
        try:
            st = os.lstat(moved)  # a link is not the file read
            if not stat.S_ISREG(st.st_mode) or st.st_size < cursor.offset or (found and st.st_mtime_ns <= found[0]):
                continue
            if ((st.st_dev, st.st_ino) == (cursor.dev, cursor.inode)) != copied and (
                not cursor.head or head_hash(moved, cursor.size) == cursor.head
            ):
                found = (st.st_mtime_ns, moved, name, st)
        except (OSError, ValueError):
            continue
    if found is None:
        return None
    _, moved, name, st = found
    moved_cursor = cursor.model_copy(update={"dev": st.st_dev, "inode": st.st_ino, "mtime_ns": 0}) if copied else cursor
    return moved, str(Path(rel).parent / name), moved_cursor


MAX_GENERATIONS = 8
"""Rotated generations a first read goes back through, the newest (logrotate keeps 4 to 7 by custom)."""
_NUMBER = re.compile(r"[0-9]{1,5}")
"""A generation's number (`.1`, `.12`); six digits and more are a date (logrotate's `-%Y%m%d`)."""
_DATE = re.compile(r"[0-9][0-9._-]{4,}[0-9]")
_DIGITS = re.compile(r"[0-9]")


class Generation:
    """A rotated generation of a log (a plain class: a dataclass would cost 0.7 ms of every start)."""

    __slots__ = ("age", "naming", "path", "rel")

    def __init__(self, path: Path, rel: str, naming: tuple[str, str], age: int | str) -> None:
        self.path, self.rel = path, rel
        self.naming = naming
        """(separator, `#` for a number or the date's shape): generations of one naming follow each other."""
        self.age = age
        """Sorts a naming's generations oldest first: minus the number (`.1` is the newest), or the date."""


def generations(path: Path, rel: str) -> list[Generation]:
    """The rotated generations beside the log at `path`, oldest first within each naming: regular
    files (not links) named after it, a separator and then a number or a date (`log.1`,
    `log-20261127`, `log.2026-11-27`; not `log.2.gz`, not `log.bak`), other than the log itself."""
    stem = path.name
    try:
        names = os.listdir(path.parent)
        current = _identity(path) if os.path.lexists(path) else None
    except OSError:
        return []
    found: list[Generation] = []
    for name in names:
        if len(name) <= len(stem) + 1 or not name.startswith(stem) or name[len(stem)] not in _SEPARATORS:
            continue
        separator, suffix = name[len(stem)], name[len(stem) + 1 :]
        if _NUMBER.fullmatch(suffix):
            naming, age = (separator, "#"), -int(suffix)
        elif _DATE.fullmatch(suffix) and len(_DIGITS.findall(suffix)) >= 6:
            naming, age = (separator, _DIGITS.sub("0", suffix)), suffix
        else:
            continue
        try:
            st = os.lstat(path.parent / name)  # a link is not a generation
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) != current:
            found.append(Generation(path.parent / name, str(Path(rel).parent / name), naming, age))
    return sorted(found, key=lambda g: (g.naming, g.age))


def later_generations(path: Path, rel: str, moved: Path) -> list[Generation]:
    """The generations rotated out after `moved` (the file the cursor read, found under a rotated
    name), oldest first: `log.1` when it is `log.2` now, `log-20261128` when it is `log-20261127`.
    None when nothing was rotated out since, the common case (one rotation between two check-ins)."""
    found = generations(path, rel)
    this = next((g for g in found if g.path == moved), None)
    if this is None:
        return []
    return [g for g in found if g.naming == this.naming and g.age > this.age]  # type: ignore[operator]


def older_generations(path: Path, rel: str) -> list[Generation]:
    """A log's rotated generations, oldest first, of the naming that has the most (a number, when
    as many are dated)."""
    by_naming: dict[tuple[str, str], list[Generation]] = {}
    for generation in generations(path, rel):
        by_naming.setdefault(generation.naming, []).append(generation)
    if not by_naming:
        return []
    return max(by_naming.values(), key=lambda gs: (len(gs), gs[0].naming[1] == "#"))


def shifted_generations(rel: str, moved_rel: str, cited: Iterable[str]) -> list[tuple[str, str]]:
    """A numbered rotation moves every generation on by as many places as the file read moved (one
    when `log` is `log.1` now, two when `log.2`): (old name, new name) of each `cited` generation,
    the oldest first, so that no name is given to a file before its own file has moved on. Dated
    names do not move."""
    separator, suffix = moved_rel[len(rel) : len(rel) + 1], moved_rel[len(rel) + 1 :]
    if not moved_rel.startswith(rel) or separator not in _SEPARATORS or not _NUMBER.fullmatch(suffix):
        return []
    shift, found = int(suffix), []
    for name in set(cited):
        number = name[len(rel) + 1 :]
        if name.startswith(rel + separator) and _NUMBER.fullmatch(number):
            found.append((int(number), name, f"{rel}{separator}{int(number) + shift}"))
    return [(old, new) for _, old, new in sorted(found, reverse=True)]


def _identity(path: Path) -> tuple[int, int]:
    st = os.lstat(path)
    return st.st_dev, st.st_ino


def continuation(before: FileCursor, path: Path, rel: str) -> FileCursor | None:
    """A cursor that reads the file now at `path` from its start as what comes after the file
    `before` read: its step and the time of its last line carried on. None if there is no file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return FileCursor(path=rel, dev=st.st_dev, inode=st.st_ino, last_time=before.last_time, step=before.step)


def awaited_sequel(before: FileCursor, rel: str) -> FileCursor:
    """The cursor of a log renamed and not made again yet (RotatingFileHandler makes the new file at
    its next record; logrotate's `nocreate` leaves that to the program): no file (no inode), so the
    file that comes under its name is read from its start as what comes after `before`'s (tools.tail)."""
    return FileCursor(path=rel, last_time=before.last_time, step=before.step)


def renamed_away(cursors: dict[str, FileCursor], listed: Iterable[str], run_dir: Path) -> list[str]:
    """Files read before that are gone from their names and not listed now: a log renamed and not
    made again yet has its rest read where it went (read_rest)."""
    listed = set(listed)
    return [rel for rel, c in cursors.items() if c.inode and rel not in listed and not os.path.lexists(run_dir / rel)]


def still_awaited(cursors: dict[str, FileCursor], listed: Iterable[str]) -> dict[str, FileCursor]:
    """The awaited sequels (awaited_sequel) whose file has not come yet: carried to the next check-in."""
    listed = set(listed)
    return {rel: c for rel, c in cursors.items() if not c.inode and rel not in listed}


def read_rest(read: Reader[R], path: Path, rel: str, cursor: FileCursor | None) -> tuple[list[R], FileCursor | None, str] | None:
    """When the file `cursor` read was rotated away: the read of its rest under its new name and of
    each generation rotated out after it (read whole, in order), the cursor to read the new file at
    `path` with (awaited_sequel while there is none) and the note that says so. None when it was not
    rotated."""
    moved = rotated_away(path, rel, cursor)
    if moved is None:
        return None
    old_path, old_rel, old_cursor = moved
    rest = read(old_path, old_rel, old_cursor)
    rest.moved_from = rel  # what was read of the log before is in this file now, at the same lines
    reads = [rest]
    after = rest.cursor if rest.cursor is not None else old_cursor
    between = later_generations(path, rel, old_path)
    for generation in between:
        start = continuation(after, generation.path, generation.rel)
        if start is None:
            continue
        reads.append(read(generation.path, generation.rel, start))
        after = reads[-1].cursor if reads[-1].cursor is not None else start
    new_cursor = continuation(after, path, rel)
    also = f", then {', '.join(g.rel for g in between)} (rotated out since) whole" if between else ""
    then = f", the new {rel} from its start" if new_cursor is not None else f"; the new {rel} is awaited"
    if new_cursor is None and not os.path.lexists(path):
        new_cursor = awaited_sequel(after, rel)
    how = "rotated to" if old_cursor is cursor else "copied to"
    return reads, new_cursor, f"{rel} was {how} {old_rel} since the last check-in; its rest read there{also}{then}"


def read_older(read: Reader[R], path: Path, rel: str) -> tuple[list[R], FileCursor | None, str] | None:
    """A log read for the first time: the reads of its newest MAX_GENERATIONS rotated generations,
    oldest first, each the sequel of the one before, the cursor to read the log at `path` with as
    their sequel (None when no generation could be read: the log is then read as a first read), and
    the note that says so. None when it has none: attached to a run whose logs were rotated, a
    check-in knows its steps from the oldest generation kept, not from the last rotation on."""
    every = older_generations(path, rel)
    if not every:
        return None
    older = every[-MAX_GENERATIONS:]
    reads: list[R] = []
    after: FileCursor | None = None
    for generation in older:
        start = continuation(after, generation.path, generation.rel) if after is not None else None
        reads.append(read(generation.path, generation.rel, start))
        after = reads[-1].cursor if reads[-1].cursor is not None else start
    new_cursor = continuation(after, path, rel) if after is not None else None
    names = ", ".join(g.rel for g in older)
    left = f"; the {len(every) - len(older)} older not read" if len(every) > len(older) else ""
    # A generation longer than a check-in's time budget (TRL's console, read oldest first): its rest
    # is not read, as no generation is read twice; the log goes on from the part that was.
    cut = [g.rel for g, r in zip(older, reads, strict=True) if getattr(r, "behind", False)]
    left += f"; {', '.join(cut)} read only in part, in the time a check-in reads" if cut else ""
    return reads, new_cursor, f"{rel}: first read from its rotated generations on, oldest first ({names}), then itself{left}"


def read_before(
    read: Reader[R], path: Path, rel: str, cursor: FileCursor | None
) -> tuple[list[R], FileCursor | None, str] | None:
    """What of the log is in other files, read (read_rest since the last check-in; read_older at
    the first), with the cursor to read the log at `path` with next and the note; None: nothing."""
    return read_older(read, path, rel) if cursor is None else read_rest(read, path, rel, cursor)


def read_across_rotation(read: Reader[R], path: Path, rel: str, cursor: FileCursor | None) -> list[R]:
    """`read(path, rel, cursor)`, or, when the file the cursor read was rotated away, the read of its
    rest under its new name, of the generations rotated out after it, and then of the new file as
    their continuation; at a first read, the log's rotated generations before it (read_older)."""
    rotated = read_before(read, path, rel, cursor)
    if rotated is None:
        return [read(path, rel, cursor)]
    reads, new_cursor, note = rotated
    if cursor is not None and (new_cursor is None or not new_cursor.inode):  # rotated away, no new file yet
        # (at a first read, cursor None: the log is read all the same, or it would wait forever)
        reads[-1].notes.append(note)
        return reads
    new = read(path, rel, new_cursor)
    new.notes.insert(0, note)
    return [*reads, new]
