"""Append-only STATUS.md, safe against crashes, resumes and a second monitor.

Each entry ends with an id comment. Under an exclusive lock, the entry is appended only if its
id is not already in the file's tail, so a check-in re-run after a crash never appends twice,
and two monitors never interleave their writes.

`StatusFile` is the one writer of STATUS.md (the writer node's entries and the launcher's
follow-up entries both go through it); callers hold a `StatusSink`, so tests pass a fake.
"""

from __future__ import annotations

import fcntl
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

STATUS_FILE = "STATUS.md"
_TAIL = 256 << 10


class StatusSink(Protocol):
    def append(self, run_dir: Path, text: str, marker: str) -> bool:
        """Append `text` (which contains `marker`) to the run's STATUS.md unless an entry with
        that marker is already there; True if written. An OSError says why it could not be."""
        ...


class StatusFile:
    """The real sink: `{run_dir}/STATUS.md`, appended under a lock, SIGINT held off meanwhile
    (Ctrl-C never leaves half an entry)."""

    def append(self, run_dir: Path, text: str, marker: str) -> bool:
        with sigint_deferred():
            return append_entry(Path(run_dir) / STATUS_FILE, text, marker)


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


def entry_marker(run_key: str, checkin: int) -> str:
    return f"<!-- rlagent:checkin {run_key}#{checkin} -->"


def append_entry(path: Path, text: str, marker: str) -> bool:
    """Append `text` (which must contain `marker`) unless already there. True if written."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        tail = os.pread(fd, min(size, _TAIL), max(0, size - _TAIL))
        if marker.encode() in tail:
            return False
        prefix = b"\n" if size and not tail.endswith(b"\n") else b""
        if size and not tail.endswith(b"\n\n"):
            prefix += b"\n"
        os.write(fd, prefix + text.rstrip("\n").encode() + b"\n")
        os.fsync(fd)
        return True
    finally:
        os.close(fd)  # closing releases the lock
