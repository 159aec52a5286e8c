"""One log line in, its parts out: loguru (prime-rl), vLLM's stdlib format, and JSON mode.

prime-rl's loguru sink is colorized even into files, torchrun prefixes trainer lines with
`[trainer0]:`, and only the first line of a multi-line message carries the time and level.
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple

from rlagent.tools.untrusted import strip_controls

# `[trainer0]:` from torchrun's tee (and `[rank0]:` from torch's C++ logger after it); any
# `[name123]:` prefix as the multi-node sbatch strips it.
RANK_PREFIX = re.compile(r"^(?:\[[A-Za-z_]*\d*\]:)+")

_LEVELS = "TRACE|DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL"
# loguru: `HH:mm:ss` + level right-aligned to 7 + message.
_LOGURU = re.compile(rf"^(\d\d):(\d\d):(\d\d) +({_LEVELS}) (.*)$", re.S)
# vLLM / stdlib: `INFO 11-22 14:05:12 [file.py:12] msg`, optionally `(APIServer pid=1) ` first.
_VLLM = re.compile(rf"^(?:\([^)]*\) )?({_LEVELS}) \d\d-\d\d (\d\d):(\d\d):(\d\d)(?:\.\d+)? (?:\[[^\]]*\] )?(.*)$", re.S)
_JSON_TIME = re.compile(r"T(\d\d):(\d\d):(\d\d)")
# glog (torch C++, torchrun): `E0824 14:26:12.609015 45716 api.py:882] msg`, optionally in brackets.
_GLOG = re.compile(r"^\[?([IWEF])\d{4} (\d\d):(\d\d):(\d\d)\.\d+ +(?:\d+ +)?[^\]\s]+\] ?(.*)$", re.S)
_GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}

MAX_MESSAGE = 2000


class Head(NamedTuple):
    """The first line of a log record (a tuple: made for every candidate line of a cold read, at a
    third of a frozen dataclass's cost)."""

    seconds: int
    """Local time of day in seconds (the date is reconstructed by tools.dayclock)."""
    level: str
    message: str


# loguru's colours (SGR sequences), the only control sequences of most lines: removed first, and
# when nothing unprintable but tabs is left, that is what strip_controls gives, at a quarter of its cost.
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def clean(raw: bytes | bytearray) -> str:
    """Decode one raw line: invalid UTF-8 replaced, every control sequence (loguru's colours,
    anything else the program printed: tools.untrusted) and the rank prefix removed."""
    text = raw.decode("utf-8", "replace").rstrip("\r\n")
    if not text.isprintable():
        plain = _SGR.sub("", text)
        text = plain if plain.isprintable() or plain.replace("\t", "").isprintable() else strip_controls(text)
    if text[:1] == "[":
        return RANK_PREFIX.sub("", text, count=1)
    return text


def parse_head(text: str) -> Head | None:
    """Parse a cleaned line as the start of a record; None for continuation or foreign lines."""
    m = _LOGURU.match(text)
    if m:
        h, mi, s, level, message = m.groups()
        return Head(int(h) * 3600 + int(mi) * 60 + int(s), level, message[:MAX_MESSAGE])
    if text[:1] == "{":
        return _parse_json(text)
    m = _VLLM.match(text)
    if m:
        level, h, mi, s, message = m.groups()
        return Head(int(h) * 3600 + int(mi) * 60 + int(s), level, message[:MAX_MESSAGE])
    m = _GLOG.match(text)
    if m:
        letter, h, mi, s, message = m.groups()
        return Head(int(h) * 3600 + int(mi) * 60 + int(s), _GLOG_LEVELS[letter], message[:MAX_MESSAGE])
    return None


def _parse_json(text: str) -> Head | None:
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: `{"a":[[[[...` nested past the parser's depth
        return None
    if not isinstance(record, dict) or "level" not in record or "message" not in record:
        return None
    m = _JSON_TIME.search(str(record.get("timestamp", "")))
    if not m:
        return None
    h, mi, s = (int(g) for g in m.groups())
    message = str(record["message"])
    if record.get("exception"):
        message = f"{message}\n{record['exception']}"
    return Head(h * 3600 + mi * 60 + s, str(record["level"]).upper(), message[:MAX_MESSAGE])
