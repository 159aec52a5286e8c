"""The bytes `rlagent diagnose` judges, from a file, a pipe (a FIFO, `<(cmd)`, opened by
safefs.open_regular without waiting for a writer) or stdin: at most the last MAX_INPUT of them
(where a crash is), gzip decompressed as it streams (its tail alone could not be), never more than
about twice that held in memory; and the first HEAD bytes, which say what the input is."""

from __future__ import annotations

import gzip
import io
import os
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

MAX_INPUT = 32 << 20
"""Bytes judged at most: of a longer input, the last ones."""
MAX_GUNZIP = 256 << 20
"""Decompressed bytes read at most (a small .gz can hold terabytes of zeros)."""
_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20
HEAD = 64 << 10


class InputError(Exception):
    """Input that cannot be read at all: one clear line for the person."""


@dataclass
class Input:
    data: bytes
    """The last MAX_INPUT bytes (all of a shorter input)."""
    head: bytes
    """The first HEAD bytes: what the input is (a W&B CSV's header, a JSON's brace) is seen there,
    where a cut tail has lost it."""
    total: int
    """Bytes the input held (decompressed)."""
    file: Path | None = None
    """The input itself when it is a regular file and not gzipped: an export's reader reads it whole."""
    notes: list[str] = field(default_factory=list)
    what: str = "input"

    @property
    def cut(self) -> bool:
        return self.total > len(self.data)

    @property
    def cut_note(self) -> str | None:
        """What a judge of `data` alone must say (a reader of `file` reads all of it)."""
        return f"{self.what} is {self.total / 2**20:.0f} MB: the last {MAX_INPUT >> 20} MB were judged" if self.cut else None


def read_input(handle: io.BufferedReader, name: str, file: Path | None = None) -> Input:
    """The bytes to judge of an open file or stream (`file`: its path, when it is one), with a note
    for each thing not read as it was."""
    notes: list[str] = []
    if handle.peek(2)[:2] == _GZIP_MAGIC:
        notes.append("gzipped input, decompressed")
        data, head, total, error = _tail(gzip.GzipFile(fileobj=handle, mode="rb"), MAX_GUNZIP)
        if error is not None and not data:
            raise InputError(f"{name}: a gzip file that cannot be decompressed ({error})")
        if error is not None:
            notes.append(f"the gzip stream breaks off after {total:,} decompressed bytes ({error}): judged what came before")
        elif total >= MAX_GUNZIP:
            notes.append(f"decompressed only the first {MAX_GUNZIP >> 20} MB: newer lines after them were not read")
        return Input(data, head, total, None, notes, "decompressed input")
    size = _regular_size(handle)
    head = b""
    if size is not None and size > MAX_INPUT:
        head = os.pread(handle.fileno(), HEAD, 0)
        handle.seek(size - MAX_INPUT)  # a file: straight to its tail
    data, first, total, _ = _tail(handle, None)
    return Input(data, head or first, max(total, size or 0), file if size is not None else None, notes)


def _regular_size(handle: BinaryIO) -> int | None:
    try:
        st = os.fstat(handle.fileno())
    except (OSError, ValueError, AttributeError):
        return None  # an in-memory stream
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _tail(stream: io.BufferedIOBase, cap: int | None) -> tuple[bytes, bytes, int, str | None]:
    """(the last MAX_INPUT bytes of `stream` read to its end or to `cap` bytes, its first HEAD
    bytes, how many were read, why reading broke off or None). A pipe cannot seek: its bytes pass
    through a buffer cut back to MAX_INPUT whenever it doubles."""
    kept, head, total, error = bytearray(), b"", 0, None
    while cap is None or total < cap:
        try:
            chunk = stream.read1(_CHUNK if cap is None else min(_CHUNK, cap - total))  # read1: a break loses no bytes before it
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            error = str(exc) or type(exc).__name__
            break
        if not chunk:
            break
        if len(head) < HEAD:
            head = (head + chunk)[:HEAD]
        total += len(chunk)
        kept += chunk
        if len(kept) >= 2 * MAX_INPUT:
            del kept[:-MAX_INPUT]
    return bytes(kept[-MAX_INPUT:]), head, total, error
