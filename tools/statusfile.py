"""Append-only STATUS.md, safe against crashes, resumes and a second monitor.

Each entry ends with an id comment. Under an exclusive lock, the entry is appended only if its
id is not already in the file's tail, so a check-in re-run after a crash never appends twice,
and two monitors never interleave their writes.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

_TAIL = 256 << 10


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


def has_entry(path: Path, marker: str) -> bool:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - _TAIL))
            return marker.encode() in f.read()
    except FileNotFoundError:
        return False
