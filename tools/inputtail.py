"""The bytes `rlagent diagnose` judges, from a file, a pipe (a FIFO, `<(cmd)`) or stdin: at most the
last MAX_INPUT of them (where a crash is), gzip decompressed as it streams (its tail alone could not
be), never more than about twice that held in memory, and no wait on a FIFO that has no writer."""

from __future__ import annotations

import gzip
import io
import os
import stat
import zlib
from dataclasses import dataclass, field
from typing import BinaryIO

from rlagent.tools.safefs import UnsafeFile, kind_of

MAX_INPUT = 32 << 20
"""Bytes judged at most: of a longer input, the last ones."""
MAX_GUNZIP = 256 << 20
"""Decompressed bytes read at most (a small .gz can hold terabytes of zeros)."""
_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20


class InputError(Exception):
    """Input that cannot be read at all: one clear line for the person."""


@dataclass
class Input:
    data: bytes
    notes: list[str] = field(default_factory=list)


def open_input(path: str | os.PathLike) -> BinaryIO:
    """A regular file or a pipe. O_NONBLOCK lets the open of a FIFO with no writer return at once;
    read then, it is empty. Anything else (a terminal, /dev/zero) raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
            raise UnsafeFile(path, f"{kind_of(mode)}: give a file, a pipe, or - for stdin")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_input(handle: io.BufferedReader, name: str) -> Input:
    """The bytes to judge of an open file or stream, with a note for each thing not read as it was."""
    notes: list[str] = []
    if handle.peek(2)[:2] == _GZIP_MAGIC:
        notes.append("gzipped input, decompressed")
        data, total, error = _tail(gzip.GzipFile(fileobj=handle, mode="rb"), MAX_GUNZIP)
        if error is not None and not data:
            raise InputError(f"{name}: a gzip file that cannot be decompressed ({error})")
        if error is not None:
            notes.append(f"the gzip stream breaks off after {total:,} decompressed bytes ({error}): judged what came before")
        elif total >= MAX_GUNZIP:
            notes.append(f"decompressed only the first {MAX_GUNZIP >> 20} MB: newer lines after them were not read")
        what = "decompressed input"
    else:
        size = _regular_size(handle)
        if size is not None and size > MAX_INPUT:
            handle.seek(size - MAX_INPUT)  # a file: straight to its tail
        data, total, _ = _tail(handle, None)
        total = max(total, size or 0)
        what = "input"
    if total > MAX_INPUT:
        notes.append(f"{what} is {total / 2**20:.0f} MB: the last {MAX_INPUT >> 20} MB were judged")
    return Input(data, notes)


def _regular_size(handle: BinaryIO) -> int | None:
    try:
        st = os.fstat(handle.fileno())
    except (OSError, ValueError, AttributeError):
        return None  # an in-memory stream
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _tail(stream: io.BufferedIOBase, cap: int | None) -> tuple[bytes, int, str | None]:
    """(the last MAX_INPUT bytes of `stream` read to its end or to `cap` bytes, how many were read,
    why reading broke off or None). A pipe cannot seek: its bytes pass through a buffer cut back
    to MAX_INPUT whenever it doubles."""
    kept, total = bytearray(), 0
    while cap is None or total < cap:
        try:
            chunk = stream.read1(_CHUNK if cap is None else min(_CHUNK, cap - total))  # read1: a break loses no bytes before it
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            return bytes(kept[-MAX_INPUT:]), total, str(exc) or type(exc).__name__
        if not chunk:
            break
        total += len(chunk)
        kept += chunk
        if len(kept) >= 2 * MAX_INPUT:
            del kept[:-MAX_INPUT]
    return bytes(kept[-MAX_INPUT:]), total, None
