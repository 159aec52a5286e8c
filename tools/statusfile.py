"""Append-only STATUS.md, safe against crashes, resumes, a full disk and a second monitor.

Each entry ends with a marker line: `<!-- rlagent:checkin [DIGEST ]ID#N -->`. ID names the run and
the state home that wrote it (so two homes never share ids), N is the check-in, and DIGEST keys
the entry by its content. Under an exclusive lock an entry is appended only if its exact marker
line is not already in the file's tail, so a check-in re-run after a crash never appends twice,
and two monitors never interleave their writes.

`StatusFile` is the one writer of STATUS.md (the writer node's entries and the launcher's
follow-up entries both go through it); callers hold a `StatusSink`, so tests pass a fake.

A write is all or nothing: a short write (a full disk) is truncated back to where it began and
raised. A write cut short by the process dying mid-way (SIGKILL between two pages) is found by
the next append, of any monitor, through a record left beside STATUS.md while a write is under
way (`.STATUS.md.appending`, gone once the write is done), and truncated back too, but only when
what follows is exactly the start of what was being written.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import signal
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from rlagent.tools.safefs import UnsafeFile, kind_of, open_regular, read_up_to

STATUS_FILE = "STATUS.md"
_TAIL = 256 << 10
_MARKER = re.compile(rb"^<!-- rlagent:checkin (?:([0-9a-f]+) )?(\S+#\d+) -->$", re.M)


class StatusSink(Protocol):
    def append(self, run_dir: Path, text: str, marker: str) -> bool:
        """Append `text` (which contains `marker`) to the run's STATUS.md unless an entry with
        that marker is already there; True if written. An OSError says why it could not be,
        with nothing of the entry left behind."""
        ...

    def written_versions(self, run_dir: Path, key: str, checkin: int) -> list[str]:
        """Digests of the entries with id `key#checkin` already there ('' for one without)."""
        ...


class StatusFile:
    """The real sink: `{run_dir}/STATUS.md`, appended under a lock, SIGINT held off meanwhile
    (Ctrl-C never leaves half an entry)."""

    def append(self, run_dir: Path, text: str, marker: str) -> bool:
        with sigint_deferred():
            return append_entry(Path(run_dir) / STATUS_FILE, text, marker)

    def written_versions(self, run_dir: Path, key: str, checkin: int) -> list[str]:
        return written_versions(Path(run_dir) / STATUS_FILE, key, checkin)


@contextmanager
def sigint_deferred() -> Iterator[None]:
    """Block SIGINT while an entry is appended; a Ctrl-C pressed meanwhile lands right after."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    except (AttributeError, ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def entry_id(key: str, checkin: int) -> str:
    return f"{key}#{checkin}"


def entry_marker(key: str, checkin: int, digest: str | None = None) -> str:
    """The marker line of check-in `checkin`'s entry; `digest` keys it by its content."""
    return f"<!-- rlagent:checkin {digest + ' ' if digest else ''}{entry_id(key, checkin)} -->"


def _open(path: Path, flags: int = os.O_RDWR | os.O_APPEND) -> int:
    """A file of ours in the run dir, for writing: a regular file with one name, never a symlink,
    a hard link to some other file, a FIFO or a device (the run dir is not ours to trust)."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):  # O_NOFOLLOW's refusal, not a loop
            raise UnsafeFile(path, "a symbolic link; rlagent only appends to a regular file of its own") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        os.close(fd)
        what = kind_of(st.st_mode) if not stat.S_ISREG(st.st_mode) else "a hard link to another file"
        raise UnsafeFile(path, f"{what}; rlagent only appends to a regular file of its own")
    return fd


def _tail(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    return os.pread(fd, min(size, _TAIL), max(0, size - _TAIL))


def _lines_holding(tail: bytes, text: bytes) -> Iterator[bytes]:
    """The lines of `tail` that hold `text`, found by a bytes search (a regex anchored at line
    starts tries every position of a 256 KB tail: 2 ms of a warm check-in)."""
    at = tail.find(text)
    while at != -1:
        start = tail.rfind(b"\n", 0, at) + 1
        end = tail.find(b"\n", at)
        end = len(tail) if end == -1 else end
        yield tail[start:end]
        at = tail.find(text, end)


def _has_line(tail: bytes, line: bytes) -> bool:
    """`line` is a whole line of `tail` (text quoted inside an entry is never a whole marker line)."""
    return any(found == line for found in _lines_holding(tail, line))


def written_versions(path: Path, key: str, checkin: int) -> list[str]:
    """Digests of the entries with this id already in STATUS.md's tail ('' for one without)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        wanted = entry_id(key, checkin).encode()
        found = (_MARKER.fullmatch(line) for line in _lines_holding(_tail(fd), wanted))
        return [(m.group(1) or b"").decode() for m in found if m and m.group(2) == wanted]
    finally:
        os.close(fd)


def journal_of(path: Path) -> Path:
    return path.with_name(f".{path.name}.appending")


def append_entry(path: Path, text: str, marker: str) -> bool:
    """Append `text` (which must end with the line `marker`) unless that marker line is already
    there. True if written; OSError if it could not be, with nothing of it left in the file."""
    fd = _open(path)
    journal = journal_of(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _repair_torn(fd, path, journal)
        tail = _tail(fd)
        if _has_line(tail, marker.encode()):
            return False
        size = os.fstat(fd).st_size
        prefix = b"\n" if size and not tail.endswith(b"\n") else b""
        if size and not tail.endswith(b"\n\n"):
            prefix += b"\n"
        data = prefix + text.rstrip("\n").encode() + b"\n"
        _remember(journal, path, size, data)
        try:
            _write_all(fd, data, size)
        finally:  # written, or truncated back: nothing is left to repair
            with contextlib.suppress(OSError):
                journal.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)  # closing releases the lock


def _write_all(fd: int, data: bytes, size: int) -> None:
    """Write and fsync all of `data`, or truncate the file back to `size` and raise."""
    done = 0
    try:
        while done < len(data):
            n = os.write(fd, data[done:])
            if n <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            done += n
        os.fsync(fd)
    except OSError:
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        except OSError:
            pass
        raise


def _remember(journal: Path, path: Path, size: int, data: bytes) -> None:
    """Note what is about to be appended where (no fsync: it only has to outlive the process)."""
    record = json.dumps({"path": os.path.realpath(path), "size": size, "data": data.decode()}).encode()
    with contextlib.suppress(OSError):  # a full disk refuses it: the append itself stays all or nothing
        fd = _open(journal, os.O_WRONLY)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, record)
        finally:
            os.close(fd)


def _repair_torn(fd: int, path: Path, journal: Path) -> None:
    """Remove the start of an entry whose writer died mid-write (found by its journal)."""
    try:
        with open_regular(journal) as f:
            record = json.loads(read_up_to(f, 1 << 20))
        start, data = int(record["size"]), str(record["data"]).encode()
        same_file = record["path"] == os.path.realpath(path)
    except (OSError, ValueError, KeyError, TypeError):
        return
    if same_file:
        size = os.fstat(fd).st_size
        if start < size < start + len(data) and os.pread(fd, size - start, start) == data[: size - start]:
            os.ftruncate(fd, start)
            os.fsync(fd)
    with contextlib.suppress(OSError):
        journal.unlink(missing_ok=True)


def has_entry(path: Path, marker: str) -> bool:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - _TAIL))
            return _has_line(f.read(), marker.encode())
    except FileNotFoundError:
        return False
