"""Safe parsing of a printed Python dict (`str(logs)` of TRL/transformers, OpenRLHF's `Global step` dict).

Never `eval`: bare `nan`/`inf` tokens (transformers 4.x and OpenRLHF print raw floats) are replaced
outside string literals, then `ast.literal_eval` does the rest.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

_NAN = "__rlagent_nan__"
# A bare nan/inf word (not part of an identifier or a number like 1e5).
_BARE = re.compile(r"(?<![\w.])(-\s*)?(nan|inf|NaN|Infinity)(?![\w.])")
MAX_CHARS = 1_000_000  # a printed metrics dict is a few KB; refuse pathological input


def _replace_bare(text: str) -> str:
    """Replace bare nan/inf outside quotes: inf -> 1e999 (literal_eval makes it inf, -1e999 -> -inf),
    nan -> a sentinel string converted back after parsing."""
    out: list[str] = []
    pos = 0
    quote: str | None = None
    start = 0
    while pos < len(text):
        char = text[pos]
        if quote:
            if char == "\\":
                pos += 2
                continue
            if char == quote:
                quote = None
                out.append(text[start : pos + 1])
                start = pos + 1
        elif char in "'\"":
            out.append(_BARE.sub(_bare_token, text[start:pos]))
            quote = char
            start = pos
        pos += 1
    tail = text[start:]
    out.append(tail if quote else _BARE.sub(_bare_token, tail))
    return "".join(out)


def _bare_token(match: re.Match) -> str:
    if match.group(2).lower() == "nan":
        return repr(_NAN)
    return "-1e999" if match.group(1) else "1e999"


def _restore(value: Any) -> Any:
    if value == _NAN:
        return math.nan
    if isinstance(value, dict):
        return {key: _restore(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_restore(item) for item in value)
    return value


def parse_py_dict(text: str) -> dict[str, Any] | None:
    """The dict printed in `text` (which must be exactly one dict literal), or None."""
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")) or len(text) > MAX_CHARS:
        return None
    try:
        value = ast.literal_eval(_replace_bare(text))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    return {str(key): _restore(item) for key, item in value.items()}
