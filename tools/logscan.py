"""Scan a byte range of a log for the lines that matter, fast.

Logs of a long run reach gigabytes, almost all of it INFO chatter (vLLM request lines, the
pipeline view). Python cannot afford a regex per line, so candidate lines are found with
`bytes.find` on a few needles (C speed), and only those lines are decoded and parsed.
Only complete lines are consumed: a half-written last line is left for the next check-in.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from rlagent.tools.loglines import Head, clean, parse_head
from rlagent.tools.needlesearch import count_newlines, expect_read, line_starts_in
from rlagent.tools.safefs import open_regular

# Every line a rule can use contains one of these: levels, crash text that torchrun or C++
# print without a loguru head (`...Error:`, NCCL watchdog lines), and the INFO lines that
# matter (finish, resume). Step lines are SUCCESS lines; eval lines are matched by name.
PROBLEM_NEEDLES: tuple[bytes, ...] = (b"WARNING", b"ERROR", b"rror", b"NCCL")
NEEDLES: tuple[bytes, ...] = (*PROBLEM_NEEDLES, b"SUCCESS", b"finished", b"Resuming", b"Evaluated")
# vLLM's inference.log (most of a run's bytes) has no step, eval or finish lines of prime-rl's.
INFERENCE_NEEDLES = PROBLEM_NEEDLES
CHUNK = 2 << 20
"""Bytes read at a time: each is then passed over four times (needles, newlines, ASCII, NUL), which
costs less while it is still in the cache (the 1 GB bench run's inference.log: 0.39 s of CPU at 8 MB,
0.33 s at 1-4 MB)."""
MAX_LINE = 64 << 10
"""Longer lines are cut before decoding (a 1 MB line must not cost a 1 MB regex)."""
MAX_CONTINUATION_LINES = 40
# A record head starts with ESC (colour), a digit (time), a rank prefix `[`, JSON `{`, a vLLM `(pid)` or
# level word; traceback and subline continuations start otherwise and skip the head parser.
_HEAD_FIRST_BYTES = frozenset(b"\x1b0123456789[{(TDISWEC")
# A loguru head as it is written, colours and all: torchrun's rank prefixes (`[trainer0]:`), then
# `HH:mm:ss`, at least one space, a level and a space, with SGR sequences anywhere between. Once
# `clean` removes the SGRs (the only controls it can meet there) and the prefixes, that is
# `_LOGURU`'s start, so a raw line that matches is a head without being decoded and parsed. Most
# lines after a record are the INFO chatter or the next step line that ends it.
_SGR = rb"\x1b\[[0-9;]*m"
_LOGURU_HEAD = re.compile(
    rb"(?:%s|\[[A-Za-z_]*\d*\]:)*\d\d:\d\d:\d\d(?:%s)*(?: (?:%s)*)+(?:TRACE|DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL)(?:%s)* "
    % (_SGR, _SGR, _SGR, _SGR)
)
MAX_DETAIL = 4000


@dataclass(slots=True)
class ScannedLine:
    line_no: int
    """1-based line number in the file."""
    text: str
    """Text of the line, control sequences stripped (tools.untrusted)."""
    head: Head | None
    detail: list[str] = field(default_factory=list)
    """Continuation lines that belong to this record (traceback, multi-env sublines)."""


@dataclass
class ScanResult:
    lines: list[ScannedLine] = field(default_factory=list)
    end: int = 0
    """Offset just past the last complete line consumed."""
    newlines: int = 0
    stamps: list[tuple[int, int]] = field(default_factory=list)
    """(line_no, local seconds of day) of sampled dated lines, for carrying the date."""
    binary_lines: int = 0
    long_lines: int = 0


def scan_file(
    path: str | os.PathLike,
    start: int,
    end: int,
    first_line_no: int,
    needles: tuple[bytes, ...] = NEEDLES,
    sink: Callable[[list[ScannedLine], list[tuple[int, int]]], None] | None = None,
) -> ScanResult:
    """Scan complete lines of `path` in [start, end); line numbers continue from first_line_no.

    Chunks are read into one reused buffer, after the partial line carried from the last one,
    and scanned in place (no copies of the bulk bytes). With a `sink`, each chunk's lines and
    stamps go to it, in order, and are not kept: a read of 100,000 step lines holds one chunk's.
    """
    result = ScanResult(end=start)
    line_no = first_line_no  # number of the next line to be read
    buf = bytearray(min(CHUNK, max(end - start, 0)) + 4096)
    carry = 0  # bytes of an incomplete line at the front of buf
    expect_read(end - start)
    with open_regular(path) as f:
        f.seek(start)
        pos = start
        while pos < end:
            want = min(CHUNK, end - pos)
            if carry + want > len(buf):
                buf.extend(bytes(carry + want - len(buf)))
            with memoryview(buf) as view:
                got = f.readinto(view[carry : carry + want])
            if not got:
                break
            pos += got
            filled = carry + got
            cut = buf.rfind(b"\n", 0, filled) + 1
            if cut == 0:
                carry = filled
                if carry > MAX_LINE * 16:  # a pathological line with no end in sight: skip ahead
                    buf[:MAX_LINE] = buf[carry - MAX_LINE : carry]
                    carry = MAX_LINE
                continue
            line_no = _scan_buffer(buf, cut, line_no, result, needles)
            if sink is not None:
                sink(result.lines, result.stamps)
                result.lines, result.stamps = [], []
            carry = filled - cut
            buf[:carry] = buf[cut:filled]
            result.end = pos - carry
    result.newlines = line_no - first_line_no
    return result


def _scan_buffer(buf: bytes | bytearray, n: int, line_no: int, result: ScanResult, needles: tuple[bytes, ...]) -> int:
    """Scan the complete lines in buf[:n]; return the number of the line after them. Newlines are
    counted only up to each candidate line, and once for the rest."""
    starts = line_starts_in(buf, n, needles)
    result.binary_lines += _junk_lines(buf, n)
    _sample_stamp(buf, 0, line_no, result)
    cursor, cursor_line = 0, line_no
    skip_until = -1
    parsed: tuple[int, str, Head] | None = None  # the head line a record's continuation stopped at
    for start in starts:
        if start < skip_until:
            continue
        cursor_line += count_newlines(buf, cursor, start)
        cursor = start
        stop = buf.find(b"\n", start, n)
        raw = buf[start : min(stop, start + MAX_LINE)]
        if stop - start > MAX_LINE:
            result.long_lines += 1
        if b"\x00" in raw:
            continue  # junk: counted for the whole buffer below, never quoted
        if parsed is not None and parsed[0] == start:  # parsed already: lines that matter come in runs
            _, text, head = parsed
        else:
            text = clean(raw)
            head = parse_head(text)
        line = ScannedLine(cursor_line, text, head)
        if head is not None:
            skip_until, parsed = _attach_continuation(buf, n, stop + 1, line)
        result.lines.append(line)
    last_line_start = buf.rfind(b"\n", 0, n - 1) + 1
    end_line = cursor_line + count_newlines(buf, cursor, n)
    _sample_stamp(buf, last_line_start, end_line - 1, result)
    return end_line


def junk_lines(buf: bytes) -> int:
    """Lines holding NUL bytes or invalid UTF-8, anywhere in the buffer (C-speed when there are none)."""
    return _junk_lines(buf, len(buf))


def _junk_lines(buf: bytes | bytearray, n: int) -> int:
    """junk_lines of buf[:n] (bytes after n, the carried partial line, are never counted)."""
    starts: set[int] = set()
    i = buf.find(b"\x00", 0, n)
    while i != -1:
        starts.add(buf.rfind(b"\n", 0, i) + 1)
        i = buf.find(b"\x00", i + 1, n)
    if not buf.isascii():  # the whole buffer: a non-ASCII byte past n only costs the exact check below
        try:
            with memoryview(buf) as view:
                str(view[:n], "utf-8")
        except UnicodeDecodeError as exc:
            first = buf.rfind(b"\n", 0, exc.start) + 1
            offset = first
            for line in buf[first:n].split(b"\n"):
                if not line.isascii():
                    try:
                        line.decode("utf-8")
                    except UnicodeDecodeError:
                        starts.add(offset)
                offset += len(line) + 1
    return len(starts)


def _attach_continuation(buf: bytes | bytearray, n: int, pos: int, line: ScannedLine) -> tuple[int, tuple[int, str, Head] | None]:
    """Attach the lines after a record head that have no head of their own; return where they end
    and, when a head other than loguru's ends them, that head line parsed (its offset, text and
    head). A loguru head is known from its bytes and left to the scan, which parses it only if it
    is a line that matters.

    Once the detail is full the rest is left to the scan: a long traceback's last lines (the
    exception, torchrun's `ChildFailedError:`) are then classified on their own.
    """
    size = 0
    while pos < n and len(line.detail) < MAX_CONTINUATION_LINES and size < MAX_DETAIL:
        stop = buf.find(b"\n", pos, n)
        raw = buf[pos : min(stop, pos + MAX_LINE)]
        if raw and raw[0] in _HEAD_FIRST_BYTES and _LOGURU_HEAD.match(raw):
            return pos, None  # a head: parsed by the scan if it is a line that matters
        text = clean(raw)
        if raw and raw[0] in _HEAD_FIRST_BYTES and (head := parse_head(text)) is not None:
            return pos, (pos, text, head)
        if b"\x00" in raw:
            text = ""  # keep the line count right; junk is not quoted
        if size < MAX_DETAIL:
            line.detail.append(text[: MAX_DETAIL - size])
            size += len(text)
        pos = stop + 1
    return pos, None


TAIL_FOR_TIME = 64 << 10


def newest_time_of_day(path: str | os.PathLike, root: str | os.PathLike) -> int | None:
    """Seconds of day of the last dated line in the file's last 64 KB (None: none there, or unreadable)."""
    try:
        with open_regular(path, root) as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - TAIL_FOR_TIME))
            tail = f.read(TAIL_FOR_TIME)
    except (OSError, ValueError):
        return None
    for raw in reversed(tail.split(b"\n")[1 if size > TAIL_FOR_TIME else 0 :]):  # the first may be cut
        head = parse_head(clean(raw[:256])) if raw and raw[0] in _HEAD_FIRST_BYTES else None
        if head is not None:
            return head.seconds
    return None


def _sample_stamp(buf: bytes | bytearray, start: int, line_no: int, result: ScanResult) -> None:
    """Record the time of a line at a buffer's edge, so long stretches without hits keep their dates."""
    stop = buf.find(b"\n", start)
    if stop == -1:
        return
    head = parse_head(clean(buf[start : min(stop, start + 256)]))
    if head is not None:
        result.stamps.append((line_no, head.seconds))
