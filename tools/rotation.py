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
from collections.abc import Callable
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


def later_generations(path: Path, rel: str, moved: Path) -> list[tuple[Path, str]]:
    """The generations rotated out after `moved` (the file the cursor read, found under a rotated
    name), oldest first, with their run-relative names: `log.1` when it is `log.2` now (a numbered
    name is older the higher its number: logrotate, RotatingFileHandler), `log-20261128` when it is
    `log-20261127` (a dated name sorts by its date). Named like `moved` (the same separator; for a
    date, digits where it has digits), regular files, neither `moved` nor the log at `path`; none
    when nothing was rotated out since, the common case (one rotation between two check-ins)."""
    stem, name = path.name, moved.name
    separator, suffix = name[len(stem)], name[len(stem) + 1 :]
    numbered = _NUMBER.fullmatch(suffix) is not None
    shape = _DIGITS.sub("0", suffix)
    try:
        names = os.listdir(path.parent)
        skip = {_identity(moved), _identity(path) if os.path.lexists(path) else None}
    except OSError:
        return []
    found: list[tuple[int | str, Path, str]] = []
    for other in names:
        other_suffix = other[len(stem) + 1 :]
        if not other.startswith(stem + separator):
            continue
        if numbered:
            newer = _NUMBER.fullmatch(other_suffix) is not None and int(other_suffix) < int(suffix)
        else:
            newer = _DIGITS.sub("0", other_suffix) == shape and other_suffix > suffix
        if not newer:
            continue
        generation = path.parent / other
        try:
            st = os.lstat(generation)  # a link is not a generation
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in skip:
            found.append((-int(other_suffix) if numbered else other_suffix, generation, str(Path(rel).parent / other)))
    return [(generation, generation_rel) for _, generation, generation_rel in sorted(found)]


_DIGITS = re.compile(r"[0-9]")
_NUMBER = re.compile(r"[0-9]{1,5}")
"""A generation's number (`.1`, `.12`); six digits and more are a date (logrotate's `-%Y%m%d`)."""


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


def read_rest(read: Reader[R], path: Path, rel: str, cursor: FileCursor | None) -> tuple[list[R], FileCursor | None, str] | None:
    """When the file `cursor` read was rotated away: the read of its rest under its new name and of
    each generation rotated out after it (read whole, in order), the cursor to read the new file at
    `path` with (None while there is none) and the note that says so. None when it was not rotated."""
    moved = rotated_away(path, rel, cursor)
    if moved is None:
        return None
    old_path, old_rel, old_cursor = moved
    rest = read(old_path, old_rel, old_cursor)
    rest.moved_from = rel  # what was read of the log before is in this file now, at the same lines
    reads = [rest]
    after = rest.cursor if rest.cursor is not None else old_cursor
    between = later_generations(path, rel, old_path)
    for generation, generation_rel in between:
        start = continuation(after, generation, generation_rel)
        if start is None:
            continue
        reads.append(read(generation, generation_rel, start))
        after = reads[-1].cursor if reads[-1].cursor is not None else start
    new_cursor = continuation(after, path, rel)
    also = f", then {', '.join(name for _, name in between)} (rotated out since) whole" if between else ""
    then = f", the new {rel} from its start" if new_cursor is not None else ""
    how = "rotated to" if old_cursor is cursor else "copied to"
    return reads, new_cursor, f"{rel} was {how} {old_rel} since the last check-in; its rest read there{also}{then}"


def read_across_rotation(read: Reader[R], path: Path, rel: str, cursor: FileCursor | None) -> list[R]:
    """`read(path, rel, cursor)`, or, when the file the cursor read was rotated away, the read of its
    rest under its new name, of the generations rotated out after it, and then of the new file as
    their continuation."""
    rotated = read_rest(read, path, rel, cursor)
    if rotated is None:
        return [read(path, rel, cursor)]
    reads, new_cursor, note = rotated
    if new_cursor is None:
        reads[-1].notes.append(note)
        return reads
    new = read(path, rel, new_cursor)
    new.notes.insert(0, note)
    return [*reads, new]
