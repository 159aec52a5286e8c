"""Reading a console's new bytes as blocks of whole lines, CHUNK at a time, so a long read holds one
block's lines, not all of them.

A backlog over MAX_READ is read, where every row names its step, as its head and its newest bytes
with the middle only counted (HeadAndTail); otherwise (TRL numbers its rows by counting them) oldest
first, all of it unless that takes more than READ_BUDGET_S (LineBlocks with a deadline): the rest
waits for the next check-in.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import BinaryIO

from rlagent.tools.needlesearch import count_newlines, expect_read, needle_ends

MAX_READ = 64 << 20
"""A backlog longer than this in a console whose rows name their step is read as its head and its newest
bytes (HeadAndTail); a line with no newline in this many bytes is taken in part."""
READ_BUDGET_S = 20.0
"""A backlog read oldest first stops at the first block boundary past this many seconds (at least one
block is read), and goes on at the next check-in: a TRL console parses at about 2.3 s of CPU per
64 MB, so a first check-in reads about half a GB of backlog."""


def read_deadline() -> float:
    """When a read oldest first that starts now stops (a console's rows, a tracker file's records)."""
    return time.monotonic() + READ_BUDGET_S


CHUNK = 4 << 20
"""Bytes read and analysed at a time: a long read holds one block's lines, not all of them."""
HEAD_READ = CHUNK
"""A backlog over MAX_READ in a console whose rows carry their steps is read as its first HEAD_READ
bytes (the launch, the early steps the rules take their baselines from) and its newest
MAX_READ - HEAD_READ; the middle is only counted, for the line numbers."""
COUNT_BLOCK = 2 << 20
"""Bytes of a skipped middle read at a time to count its lines (into one reused buffer; its two passes
cost less while the block is still in the cache: 0.26 s per GB at 8 MB, 0.22 at 1-2 MB)."""
TRACEBACK = b"Traceback (most recent call last):"
"""The first line of a Python traceback: a skipped middle says on which of its lines they begin (a crash,
or an error a process survived, that the rules did not see)."""


class LineBlocks:
    """Up to `length` bytes of an open file from where it stands, read CHUNK bytes at a time and handed
    on as blocks of whole lines (a line longer than CHUNK comes whole, in a block of its own). With a
    `deadline` (time.monotonic()), no block is read after it once one was handed on (`stopped`).

    The bytes after the last newline are left for the next read (a half-written line waits), unless
    MAX_READ holds no newline at all: that line is taken in part (`overlong`), or it would stall the
    reader forever."""

    def __init__(self, handle: BinaryIO, length: int, deadline: float | None = None) -> None:
        self.handle, self.length, self.size, self.deadline = handle, length, CHUNK, deadline
        self.taken = 0
        """Bytes handed on (the new cursor is this far on)."""
        self.newlines = 0
        self._before = 0
        self.overlong = self.nul = self.stopped = False

    def __iter__(self) -> Iterator[bytes]:
        carry = b""
        left = self.length
        while left > 0 and len(carry) < MAX_READ:
            if self.taken and self.deadline is not None and time.monotonic() >= self.deadline:
                self.stopped = True
                break
            block = self.handle.read(min(self.size, left))
            if not block:
                break
            left -= len(block)
            cut = block.rfind(b"\n") + 1
            if cut == 0:
                carry += block
                continue
            whole, carry = (carry + block[:cut] if carry else block[:cut]), block[cut:]
            yield self._taken(whole)
        if not self.taken and len(carry) >= MAX_READ:
            self.overlong = True
            yield self._taken(carry[:MAX_READ])

    def numbered(self, first_lineno: int) -> Iterator[tuple[int, bytes]]:
        """(number of its first line, block) for each block."""
        for block in self:
            yield first_lineno + self._before, block

    def _taken(self, block: bytes) -> bytes:
        self.taken += len(block)
        self._before = self.newlines
        self.newlines += block.count(b"\n")
        self.nul = self.nul or b"\x00" in block
        return block


class HeadAndTail:
    """A backlog longer than MAX_READ, from an open file at `start` to `end`: its first HEAD_READ
    bytes and its newest MAX_READ - HEAD_READ, as numbered blocks of whole lines. The middle is read
    only to count its newlines (a C pass, at the speed of the disk cache), so line numbers and the
    cursor stay exact. For consoles whose rows carry their step: a first check-in of a week-long
    verl log must say where the run is now, not where it was a week ago."""

    def __init__(self, handle: BinaryIO, start: int, end: int) -> None:
        self.handle, self.start, self.end = handle, start, end
        self.head_length = min(HEAD_READ, MAX_READ // 2)
        self.tail_length = MAX_READ - self.head_length
        self.head = LineBlocks(handle, self.head_length)
        self.tail: LineBlocks | None = None
        self.skipped_from = self.skipped_to = start
        """The middle's bytes: [skipped_from, skipped_to)."""
        self.skipped_lines = 0
        self.skipped_tracebacks: list[int] = []
        """Lines of the middle (0 = its first) on which a Python traceback begins."""

    def numbered(self, first_lineno: int) -> Iterator[tuple[int, bytes]]:
        yield from self.head.numbered(first_lineno)
        self.skipped_from = self.start + self.head.taken
        self.skipped_to, self.skipped_lines, self.skipped_tracebacks = _count_to_line_start(
            self.handle, self.skipped_from, self.end - self.tail_length
        )
        self.handle.seek(self.skipped_to)
        self.tail = LineBlocks(self.handle, min(self.end - self.skipped_to, MAX_READ))
        yield from self.tail.numbered(first_lineno + self.head.newlines + self.skipped_lines)

    @property
    def taken(self) -> int:
        """Bytes from `start` the new cursor moves past (the middle included)."""
        return self.skipped_to - self.start + (self.tail.taken if self.tail else 0)

    @property
    def newlines(self) -> int:
        return self.head.newlines + self.skipped_lines + (self.tail.newlines if self.tail else 0)

    @property
    def overlong(self) -> bool:
        return self.head.overlong or bool(self.tail and self.tail.overlong)

    @property
    def nul(self) -> bool:
        return self.head.nul or bool(self.tail and self.tail.nul)


def _count_to_line_start(handle: BinaryIO, start: int, until: int) -> tuple[int, int, list[int]]:
    """(offset just past the last newline in [start, until), newlines there, the lines there (0 = the
    first) on which a Python traceback begins); (start, 0, []) if no newline."""
    handle.seek(start)
    keep = len(TRACEBACK) - 1  # the end of the last block, carried: a header cut by a block boundary is found whole
    buffer = bytearray(keep + COUNT_BLOCK)
    view = memoryview(buffer)
    expect_read(until - start)
    at, lines, line_start, carry = start, 0, start, 0
    found: list[tuple[int, int]] = []  # (offset just past a header, its line)
    while at < until:
        n = handle.readinto(view[carry : carry + min(COUNT_BLOCK, until - at)])
        if not n:
            break
        for end in needle_ends(buffer, 0, carry + n, TRACEBACK):
            header = end - len(TRACEBACK)  # where it starts; before `carry`, in the last block's end (no newline after it)
            found.append((at - carry + end, lines + (count_newlines(buffer, carry, header) if header > carry else 0)))
        newlines = count_newlines(buffer, carry, carry + n)
        if newlines:
            lines += newlines
            line_start = at + buffer.rfind(b"\n", carry, carry + n) + 1 - carry
        at += n
        kept = buffer[carry + n - keep : carry + n] if carry + n >= keep else buffer[: carry + n]
        carry = len(kept)
        buffer[:carry] = kept
    return line_start, lines, [line for end, line in found if end <= line_start]
