"""Console-log preprocessing shared by every framework parser (frameworks.md section 7.1).

Split on `\\n` and `\\r` (tqdm redraws with `\\r`, and a metric line can be glued to a bar), strip ANSI
codes, strip Ray's worker prefix `(TaskRunner pid=42, ip=10.0.0.1)` and its dedup suffix
`[repeated 7x across cluster]`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from rlagent.tools.safefs import open_regular

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Ray print_worker_logs: "({actor} pid={pid}) line" locally, "({actor} pid={pid}, ip={ip}) line" remotely;
# the actor name may be absent: "(pid=123) line". Only the one separating space is removed so traceback
# indentation survives (frameworks.md 7.1 strips `\s*`).
_RAY_PREFIX = re.compile(r"^\((?:(?P<actor>[^()]*?) )?pid=\d+(?:, ip=[^)]*)?\) ?")
_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")


class LogLine(NamedTuple):
    lineno: int
    """1-based `\\n` line number in the source; the `\\r` segments of one line share it."""
    text: str
    actor: str | None
    """Ray actor that printed the line (`TaskRunner`, `PPOTrainer`, ...), '' for `(pid=N)`, None if no prefix."""


def strip_ansi(text: str) -> str:
    """`text` without its ANSI codes (none spans a line, so stripping a whole text strips each line)."""
    return _ANSI.sub("", text)


def clean_line(segment: str) -> tuple[str, str | None]:
    """One segment without ANSI codes, Ray prefix and dedup suffix; also the Ray actor name."""
    # Each regex only where it can match (an ESC, a leading `(`): most segments have neither.
    text = _ANSI.sub("", segment) if "\x1b" in segment else segment
    actor = None
    if text[:1] == "(" and (match := _RAY_PREFIX.match(text)) is not None:
        actor = match.group("actor") or ""
        text = text[match.end() :]
    if "[repeated " in text:  # the suffix's regex starts with \s*: tried at every character otherwise
        text = _REPEATED.sub("", text)
    return text.rstrip(), actor


def iter_lines(text: str, first_lineno: int = 1) -> Iterator[LogLine]:
    """Every non-blank cleaned segment of `text`, with its line number."""
    for offset, physical in enumerate(text.split("\n")):
        for segment in physical.split("\r"):
            cleaned, actor = clean_line(segment)
            if cleaned.strip():
                yield LogLine(first_lineno + offset, cleaned, actor)


def preprocess(text: str, first_lineno: int = 1) -> list[LogLine]:
    return list(iter_lines(text, first_lineno))


def read_text(path) -> str:
    """A log file as text: undecodable bytes replaced, NULs dropped (binary junk must not raise).
    Only a regular file is opened (a FIFO named like a log would block forever: OSError)."""
    with open_regular(path) as handle:
        data = handle.read()
    return decode(data)


def decode(data: bytes | bytearray | memoryview) -> str:
    return str(data, "utf-8", errors="replace").replace("\x00", "")
