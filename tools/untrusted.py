"""Untrusted text: the one sanitiser of log lines, rollout completions, tmux pane text, config
values and LLM answers (DESIGN.md rule 3: quoted as evidence, never obeyed).

None of it may reach STATUS.md, a terminal or a prompt as it came: a log line or a completion can
carry terminal control sequences (a window title, a cleared screen, a hyperlink, a clipboard
write) and markdown that would render as something else. `strip_controls` removes every terminal
control sequence, whole:

- CSI, `ESC [` (or the 8-bit U+009B) with its parameters and final byte: colours, cursor moves;
- OSC, `ESC ]` (U+009D) up to BEL or ST (`ESC \\`, U+009C): titles, hyperlinks, clipboard;
- the DCS, SOS, PM and APC strings, `ESC P`, `ESC X`, `ESC ^`, `ESC _` (U+0090, U+0098,
  U+009E, U+009F) up to ST; an unterminated string ends at the end of its line (an 8-bit
  opener without a terminator is removed alone: it is more likely a stray byte);
- every other escape sequence (`ESC c`, `ESC 7`, `ESC ( B`, ...) and a lone ESC;
- the C0 controls but newline and tab (BEL, BS, NUL, ...), DEL, and the C1 controls
  U+0080-U+009F (what the 8-bit forms of the above become once decoded).

Line breaks stay line breaks: CRLF, a lone CR (a progress bar redrawing its line), VT, FF, the
separators U+001C-U+001E, NEL (U+0085) and U+2028/U+2029 become a newline.

The other functions shape clean text for one place: `clip` (one bounded line, for prompts and
JSON), `one_line` (an error message on a terminal), `md_code` (inside a markdown code span),
`md_fence` (a fenced block, word for word), `prose` (free text on a markdown line: no code
spans, HTML or links), `data_fence` (an `<untrusted>` block of a prompt) and `scrub` (every
string of a report).
"""

from __future__ import annotations

import re
from typing import Any

_CONTROL = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"  # CSI: parameters, intermediates, final
    r"|\x1b[\]PX^_][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"  # OSC, DCS, SOS, PM, APC
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)"  # their 8-bit forms, when terminated
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"  # any other escape sequence, or a lone ESC
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # C0 but tab and newline, DEL, C1
)

_BREAK = re.compile(r"\r\n|[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")

FENCE_OPEN = "<untrusted"
FENCE_CLOSE = "</untrusted>"


def strip_controls(text: object) -> str:
    """`text` without any terminal control sequence (the module docstring lists them); newlines
    and tabs stay."""
    flat = str(text)
    if flat.isprintable():  # the common case, at C speed
        return flat
    return _CONTROL.sub("", _BREAK.sub("\n", flat))


def bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip(text: object, limit: int) -> str:
    """One line (whitespace collapsed), no control characters, at most `limit` characters."""
    return bounded(" ".join(strip_controls(text).split()), limit)


def one_line(text: object, limit: int = 2000) -> str:
    """An error message for a terminal: no control sequences, its line breaks made spaces (its
    own spacing kept: a path with two spaces stays that path), at most `limit` characters (an
    exception may quote a whole config)."""
    return bounded(strip_controls(text).replace("\n", " "), limit)


def md_code(text: object, limit: int = 300) -> str:
    """Inside a markdown code span: one line (lines joined by ⏎), no backticks, bounded."""
    clean = strip_controls(text).replace("\t", " ")
    flat = " ⏎ ".join(part.strip() for part in clean.splitlines() if part.strip())
    return bounded(flat.replace("`", "'"), limit)


def md_fence(text: object, indent: int = 0) -> str:
    """Quoted word for word in a fenced block (a longer fence than any backtick run in it)."""
    clean = strip_controls(text)
    longest = max((len(run) for run in re.findall(r"`+", clean)), default=0)
    ticks, pad = "`" * max(3, longest + 1), " " * indent
    return f"{pad}{ticks}\n{pad}{clean}\n{pad}{ticks}"


def prose(text: object, limit: int = 400) -> str:
    """Free text on a markdown line (a model's reasons, an error message): one line, no code
    spans, HTML or links, bounded. It is shown to people, never run."""
    flat = " ".join(strip_controls(text).split())
    flat = flat.replace("`", "'").replace("<", "‹").replace(">", "›").replace("](", "] (")
    return bounded(flat, limit)


def fence_attr(text: object) -> str:
    """A value for a fence's `source` attribute: one line, no quotes or brackets."""
    return re.sub(r"[\"<>\n\r]", "'", strip_controls(text))[:160]


def data_fence(text: object, source: str, limit: int | None = None) -> str:
    """One `<untrusted source="...">` block of a prompt: the text cannot close or open a fence
    (the angle bracket of our tag becomes a look-alike), has no control characters, is bounded."""
    flat = re.sub(r"<(/?)untrusted", r"‹\1untrusted", strip_controls(text), flags=re.IGNORECASE)
    if limit is not None:
        flat = bounded(flat, limit)
    return f'{FENCE_OPEN} source="{fence_attr(source)}">\n{flat}\n{FENCE_CLOSE}'


def scrub(value: Any) -> Any:
    """Every string in a JSON-like value (dicts, lists) through `strip_controls`; keys too."""
    if isinstance(value, str):
        return strip_controls(value)
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value
