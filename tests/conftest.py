"""Shared test helpers: prime-rl log lines built exactly as prime-rl-formats.md gives them."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rlagent.evals.simulator.logfmt import loguru_line as _loguru_line
from rlagent.evals.simulator.logfmt import prefix_lines


def loguru_line(clock: str, level: str, message: str, prefix: str = "") -> str:
    """A record exactly as prime-rl's loguru sink writes it (the simulator proves byte identity)."""
    text = _loguru_line(clock, level, message)
    return prefix_lines(text, prefix) if prefix else text


def set_mtime(path: Path, when: datetime) -> None:
    stamp = when.timestamp()
    os.utime(path, (stamp, stamp))


@pytest.fixture(autouse=True)
def _hermetic(tmp_path, monkeypatch):
    """Every test gets its own state home and UTC log times."""
    monkeypatch.setenv("RLAGENT_HOME", str(tmp_path / "rlagent-home"))
    monkeypatch.setenv("TZ", "UTC")


UTC_NOON = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
