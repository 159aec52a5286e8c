"""Shared test helpers: prime-rl log lines built exactly as prime-rl-formats.md gives them."""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rlagent.evals.simulator.logfmt import loguru_line as _loguru_line
from rlagent.evals.simulator.logfmt import prefix_lines


def pytest_configure(config):
    """A suite started with Ctrl-C ignored (`pytest &` in a script) would hand that to every rlagent it
    starts, which keeps it ignored as a program should: the tests that stop one with Ctrl-C need it on."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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
    # Claude is never reached from a test: a key in the developer's shell must not switch it on.
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def pytest_recording_configure(config, vcr):
    """Cassettes match a Messages API call by method, path and tool_choice: not by host and port
    (a cassette recorded against the real API replays against the local stub's URL) and not by
    body (a reworded prompt still replays); interactions play in recorded order, once each."""
    import json

    def messages_call(r1, r2):
        def choice(request):
            try:
                return json.dumps(json.loads(request.body or b"{}").get("tool_choice"), sort_keys=True)
            except ValueError:
                return None

        assert r1.method == r2.method and r1.path == r2.path and choice(r1) == choice(r2)

    vcr.register_matcher("messages_call", messages_call)


UTC_NOON = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
