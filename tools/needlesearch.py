"""Start offsets of the lines that contain any of a few byte needles.

The cold read of a long run goes through gigabytes of vLLM request lines to find a few
hundred that matter. Hyperscan (SIMD, all needles in one pass) does that at memory speed;
without it (a platform with no wheel) the same answer comes from `bytes.find`, one pass per
needle. Both return exactly the same offsets (tests/test_needlesearch.py).
"""

from __future__ import annotations

import os
import re
import sys
import threading

try:  # x86_64 wheels bundle the engine; elsewhere the fallback below answers the same.
    import hyperscan
except ImportError:  # pragma: no cover - exercised where hyperscan is unavailable
    hyperscan = None


def line_starts(buf: bytes, needles: tuple[bytes, ...]) -> list[int]:
    """Sorted start offsets of lines of `buf` (complete lines) containing any needle."""
    return line_starts_in(buf, len(buf), needles)


def line_starts_in(buf: bytes | bytearray, n: int, needles: tuple[bytes, ...]) -> list[int]:
    """`line_starts` of buf[:n] (complete lines), without copying it."""
    if hyperscan is not None and n >= 4096:
        return _line_starts_of(buf, n, _hyperscan_ends(buf, n, needles))
    return _line_starts_by_find(buf, n, needles)


def line_starts_by_find(buf: bytes, needles: tuple[bytes, ...]) -> list[int]:
    return _line_starts_by_find(buf, len(buf), needles)


def _line_starts_by_find(buf: bytes | bytearray, n: int, needles: tuple[bytes, ...]) -> list[int]:
    starts: set[int] = set()
    for needle in needles:
        i = buf.find(needle, 0, n)
        while i != -1:
            starts.add(buf.rfind(b"\n", 0, i) + 1)
            line_end = buf.find(b"\n", i, n)
            i = -1 if line_end == -1 else buf.find(needle, line_end, n)
    return sorted(starts)


def needle_ends(buf: bytes | bytearray, start: int, n: int, needle: bytes) -> list[int]:
    """End offsets of the occurrences of one needle in buf[start:n], in order (hyperscan, else bytes.find;
    occurrences do not overlap one another: a traceback header cannot)."""
    if hyperscan is not None and n - start >= 4096:
        with memoryview(buf) as view:
            return [start + end for end in _hyperscan_ends(view[start:], n - start, (needle,))]
    ends = []
    i = buf.find(needle, start, n)
    while i != -1:
        ends.append(i + len(needle))
        i = buf.find(needle, i + len(needle), n)
    return ends


_local = threading.local()


_NUMPY_FROM = 16 << 10
"""Ranges this long may be counted with numpy (a SIMD compare: 66 us a MB against 321 us for
bytes.count; 2.5 us against 4.8 for 16 KB, about even at 4 KB)."""
_NUMPY_AFTER = 256 << 20
"""...once this process has counted this much the plain way: importing numpy costs about 80 ms, what
its compare saves on a third of a GB, so an `rlagent check` reading a few new MB never pays it, and a
cold read of gigabytes pays it once."""
_counted = 0


def newlines_in(data: bytes) -> int:
    """Newlines in `data`, found with bytes.find (memchr, several GB/s) while lines are long, as in a
    rollouts file of 4 KB lines (0.13 ms for 3.8 MB against 0.9 ms for bytes.count, which compares
    byte by byte); the rest in one bytes.count once they turn out short (below 512 bytes on average)."""
    n, at = 0, data.find(b"\n")
    while at != -1:
        n += 1
        if not n & 63 and at < n * 512:
            return n + data.count(b"\n", at + 1)
        at = data.find(b"\n", at + 1)
    return n


def expect_read(n_bytes: int) -> None:
    """A read of n_bytes begins: one of _NUMPY_AFTER or more counts with numpy from its first MB
    (it would take numpy after its first 256 MB anyway, and bytes.count is 5x slower until then)."""
    global _counted
    if n_bytes >= _NUMPY_AFTER:
        _counted = max(_counted, _NUMPY_AFTER)


def count_newlines(buf: bytes | bytearray, start: int, end: int) -> int:
    """Newlines in buf[start:end], without copying it."""
    global _counted
    if end - start >= _NUMPY_FROM and _counted >= _NUMPY_AFTER:
        numpy = _numpy()
        return int(numpy.count_nonzero(numpy.frombuffer(buf, numpy.uint8, end - start, start) == 10))
    _counted += end - start  # threads (`rlagent watch`) may lose an addition: the threshold is a rough one
    return buf.count(b"\n", start, end)


def _numpy():
    """numpy, imported with one OpenBLAS thread if this is its first import: its pool of a thread per
    core spins as it starts (0.06-0.08 s of the other core's CPU, measured), which in a split read
    (tools/forkread.py) is the core the other process reads on. No BLAS call is made here."""
    if "numpy" not in sys.modules:
        with _lock:
            before = os.environ.get("OPENBLAS_NUM_THREADS")
            os.environ["OPENBLAS_NUM_THREADS"] = "1"
            try:
                import numpy  # noqa: F401
            finally:
                if before is None:
                    del os.environ["OPENBLAS_NUM_THREADS"]
                else:
                    os.environ["OPENBLAS_NUM_THREADS"] = before
    return sys.modules["numpy"]


_lock = threading.Lock()


def _database(needles: tuple[bytes, ...]):
    """One compiled database per thread: a database's scratch space serves one scan at a time
    (a second thread scanning meanwhile gets ScratchInUseError), and `rlagent watch` checks
    several runs at once."""
    cached = getattr(_local, "databases", None)
    if cached is None:
        cached = _local.databases = {}
    if needles not in cached:
        cached[needles] = _compile(needles)
    return cached[needles]


def _compile(needles: tuple[bytes, ...]):
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(
        expressions=[re.escape(n) for n in needles],
        ids=list(range(len(needles))),
        elements=len(needles),
        flags=[0] * len(needles),
    )
    return database


def _hyperscan_ends(buf: bytes | bytearray, n: int, needles: tuple[bytes, ...]) -> list[int]:
    ends: list[int] = []

    def on_match(_id: int, _start: int, end: int, _flags: int, _context: object) -> None:
        ends.append(end)

    with memoryview(buf) as view:
        _database(needles).scan(view[:n], match_event_handler=on_match)
    return ends


def _line_starts_of(buf: bytes | bytearray, n: int, ends: list[int]) -> list[int]:
    starts: list[int] = []
    line_end = -1
    for end in sorted(ends):
        inside = end - 1  # last byte of the match
        if inside <= line_end:
            continue
        starts.append(buf.rfind(b"\n", 0, inside) + 1)
        line_end = buf.find(b"\n", inside, n)
        if line_end == -1:
            line_end = n
    return starts
