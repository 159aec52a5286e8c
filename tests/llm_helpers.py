"""Helpers of the LLM tests: copies of bundled runs, a monitor with a scripted or real client,
and valid answers to start from."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rlagent.agents.llm.runtime import LLMRuntime
from rlagent.graph.runner import ActionConfig, Monitor
from rlagent.models.state import CheckinState
from rlagent.tools.layout import discover_run
from rlagent.tools.llm.client import LLMChoice, LLMSettings, ModelClient, ScriptedClient

ROOT = Path(__file__).resolve().parent.parent
RUNS = {
    "reverse-text-h": ROOT / "examples/runs/reverse-text-h",
    "reverse-text-l": ROOT / "examples/runs/reverse-text-l",
    "crash-oom-h": ROOT / "evals/fixtures/19_crash-oom-h/run",
    "nan-h": ROOT / "evals/fixtures/16_nan-h/run",
    "stall-h": ROOT / "evals/fixtures/27_stall-h/run",
}
LAUNCH = "uv run rl @ configs/rl.toml --run.name crash-oom-h"


def copy_run(name: str, tmp_path: Path) -> Path:
    """A fresh copy of a bundled run, dated as if recorded on 2026-11-21 (git keeps no mtimes)."""
    target = tmp_path / name
    shutil.copytree(RUNS[name], target, symlinks=True)
    stamp = datetime(2026, 11, 21, 23, 59, 59, tzinfo=UTC).timestamp()
    for path in target.rglob("*"):
        if path.is_file() and not path.is_symlink():
            os.utime(path, (stamp, stamp))
    return target


def runtime(client: ModelClient, **settings: Any) -> LLMRuntime:
    return LLMRuntime(LLMSettings(mode="claude", **settings), LLMChoice(True, "--llm claude"), client_factory=lambda: client)


def scripted(*replies: Any, **settings: Any) -> tuple[LLMRuntime, ScriptedClient]:
    fake = ScriptedClient(list(replies))
    return runtime(fake, **settings), fake


def monitor(run_dir: Path, tmp_path: Path, llm: LLMRuntime | None = None, launch_command: str | None = None) -> Monitor:
    actions = ActionConfig(launch_command=launch_command) if launch_command else None
    return Monitor(discover_run(run_dir), home=tmp_path / "home", offline=True, llm=llm, actions=actions)


def check(run_dir: Path, tmp_path: Path, llm: LLMRuntime | None = None, launch_command: str | None = None) -> CheckinState:
    m = monitor(run_dir, tmp_path, llm, launch_command)
    try:
        return m.check_in()
    finally:
        m.close()


def diagnosis(**fields: Any) -> dict[str, Any]:
    """A valid report_diagnosis input, with the given fields replaced."""
    return {"rule_findings": [], "extra_findings": [], "narrative": "Nothing new beyond the rules.", "proposal": None, **fields}


def log_line(run_dir: Path, rel: str, number: int) -> str:
    """Line `number` of a log as a reader sees it (control sequences and the rank prefix removed)."""
    from rlagent.tools.loglines import clean

    with open(run_dir / rel, "rb") as f:
        for index, raw in enumerate(f, 1):
            if index == number:
                return clean(raw)
    raise AssertionError(f"{rel} has no line {number}")
