"""Shared test helpers: prime-rl log lines built exactly as prime-rl-formats.md gives them."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

# loguru with colorize=True and prime-rl's format (the simulator tests prove byte identity).
LEVEL_COLOR = {"INFO": "\x1b[1m", "SUCCESS": "\x1b[32m\x1b[1m", "WARNING": "\x1b[33m\x1b[1m", "ERROR": "\x1b[31m\x1b[1m",
               "DEBUG": "\x1b[34m\x1b[1m"}


def loguru_line(clock: str, level: str, message: str, prefix: str = "") -> str:
    color = LEVEL_COLOR[level]
    first, *rest = message.split("\n")
    head = f"{prefix}\x1b[2m{clock}\x1b[0m {color}{level: >7}\x1b[0m {color}\x1b[22m{first}"
    lines = [head] + [f"{prefix}{line}" for line in rest]
    lines[-1] += "\x1b[0m"
    return "\n".join(lines) + "\n"


def set_mtime(path: Path, when: datetime) -> None:
    stamp = when.timestamp()
    os.utime(path, (stamp, stamp))


@pytest.fixture(autouse=True)
def _hermetic(tmp_path, monkeypatch):
    """Every test gets its own state home and UTC log times."""
    monkeypatch.setenv("RLAGENT_HOME", str(tmp_path / "rlagent-home"))
    monkeypatch.setenv("TZ", "UTC")


UTC_NOON = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
