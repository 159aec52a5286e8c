"""Byte-exact prime-rl console lines, without going through loguru for every line.

prime-rl logs with loguru, format `<dim>{time:HH:mm:ss}</dim> <level>{level: >7}</level>
<level>\\033[22m{message}\\033[0m</level>` and `colorize=True`, so every log file holds SGR codes.
A monitor must parse exactly those bytes, so the simulator reproduces them; a test checks this
module against real loguru for every level. Formatting by hand is ~50x faster than loguru,
which matters for the 1 GB benchmark run.
"""

from __future__ import annotations

from typing import Literal

Level = Literal["DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR"]

RESET = "\x1b[0m"
DIM = "\x1b[2m"
NO_BOLD = "\x1b[22m"

# loguru's default level colours (`<bold>`, `<green><bold>`, ...), rendered as SGR codes.
LEVEL_ANSI: dict[str, str] = {
    "DEBUG": "\x1b[34m\x1b[1m",
    "INFO": "\x1b[1m",
    "SUCCESS": "\x1b[32m\x1b[1m",
    "WARNING": "\x1b[33m\x1b[1m",
    "ERROR": "\x1b[31m\x1b[1m",
}

# Everything between the time and the message, per level, precomputed once.
_HEAD: dict[str, str] = {level: f"{RESET} {ansi}{level: >7}{RESET} {ansi}{NO_BOLD}" for level, ansi in LEVEL_ANSI.items()}
_TAIL = f"{RESET}{RESET}\n"

TRAINER_PREFIX = "[trainer0]:"
"""torchrun `--tee=3 --local-ranks-filter=0` puts this before every line rank 0 prints."""


def loguru_line(hhmmss: str, level: Level, message: str, exception: str = "") -> str:
    """One record as prime-rl's loguru sink writes it (newline included).

    `exception` is the already-formatted traceback loguru appends after the line.
    """
    return f"{DIM}{hhmmss}{_HEAD[level]}{message}{_TAIL}{exception}"


def prefix_lines(text: str, prefix: str = TRAINER_PREFIX) -> str:
    """Prefix every line of `text` (which ends in a newline), as torchrun's tee does."""
    if not text:
        return text
    body = text[:-1] if text.endswith("\n") else text
    return prefix + body.replace("\n", "\n" + prefix) + "\n"


def format_time(seconds: float) -> str:
    """prime-rl's `format_time` for step durations: `850ms`, `41.2s`, `2m 5s`, `1h 3m`, `1d 2h`."""
    if seconds >= 86400:
        days, hours = seconds // 86400, (seconds % 86400) // 3600
        return f"{days:.0f}d" + (f" {hours:.0f}h" if hours > 0 else "")
    if seconds >= 3600:
        hours, minutes = seconds // 3600, (seconds % 3600) // 60
        return f"{hours:.0f}h" + (f" {minutes:.0f}m" if minutes > 0 else "")
    if seconds >= 60:
        minutes, secs = seconds // 60, (seconds % 60) // 1
        return f"{minutes:.0f}m" + (f" {secs:.0f}s" if secs > 0 else "")
    if seconds < 1:
        return f"{seconds * 1e3:.0f}ms"
    return f"{seconds:.1f}s"
