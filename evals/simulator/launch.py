"""Turning a `rlagent simulate` command line into the scenario of one launch, as prime-rl's
launcher would: a fresh run refuses a directory with artifacts, a resume needs the run's
checkpoint and starts the next attempt from it (never silently from scratch).

The scenario's parameters are saved in the run directory (`.rlagent-simulator.json`) so that a
resume continues the same simulated run, as `uv run rl @ same.toml --resume` does.
"""

from __future__ import annotations

import json
from pathlib import Path

from .layout import RunPaths
from .scenario import Scenario

PARAMS_FILE = ".rlagent-simulator.json"


class LaunchError(Exception):
    """A launch prime-rl would refuse; the message is one line for the user."""


def is_empty(path: Path) -> bool:
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


def save_params(run_dir: Path, scenario: Scenario) -> None:
    fields = scenario.model_dump(mode="json", exclude={"attempt", "resume_step", "start"})
    (run_dir / PARAMS_FILE).write_text(json.dumps(fields, indent=2) + "\n")


def load_params(run_dir: Path) -> dict:
    path = run_dir / PARAMS_FILE
    if not path.is_file():
        raise LaunchError(f"{run_dir} was not written by `rlagent simulate` (no {PARAMS_FILE}): nothing to resume")
    return json.loads(path.read_text())


def complete_checkpoints(run_dir: Path, layout: str) -> list[int]:
    """Steps whose checkpoint has both parts (trainer/.metadata, orchestrator/progress.pt)."""
    paths = RunPaths(run_dir, layout)
    base = run_dir / "checkpoints"
    steps = []
    if base.is_dir():
        for d in base.iterdir():
            if d.name.startswith("step_") and d.name[5:].isdigit():
                n = int(d.name[5:])
                if (paths.ckpt_trainer(n) / ".metadata").is_file() and (paths.ckpt_orchestrator(n) / "progress.pt").is_file():
                    steps.append(n)
    return sorted(steps)


def resume_step(run_dir: Path, layout: str, requested: int | None) -> int:
    """The checkpoint step a resume starts from: `requested`, or the newest complete one
    (`--resume`, `--ckpt.resume-step -1`)."""
    steps = complete_checkpoints(run_dir, layout)
    if requested is None or requested == -1:
        if not steps:
            raise LaunchError(f"no complete checkpoint under {run_dir}/checkpoints: nothing to resume from")
        return steps[-1]
    if requested < 1:
        raise LaunchError(f"resume step must be >= 1 (or -1 for the latest); got {requested}")
    if requested not in steps:
        have = ", ".join(map(str, steps)) or "none"
        raise LaunchError(f"no complete checkpoint for step {requested} under {run_dir}/checkpoints (complete: {have})")
    return requested


def next_attempt(run_dir: Path) -> int:
    logs = run_dir / "logs"
    numbers = [int(p.name[8:]) for p in logs.glob("attempt_*") if p.name[8:].isdigit()] if logs.is_dir() else []
    return max(numbers, default=1) + 1


def resumed(run_dir: Path, step: int, overrides: dict) -> Scenario:
    """The scenario of the next attempt of the run in `run_dir`, resumed from `step`."""
    params = load_params(run_dir) | {k: v for k, v in overrides.items() if v is not None}
    params["steps"] = max(params.get("steps", 0), step + 1)
    params["finished"] = params.get("finished", False) and params["steps"] == params.get("max_steps")
    try:
        return Scenario.model_validate(params | {"resume_step": step, "attempt": next_attempt(run_dir)})
    except ValueError as exc:
        raise LaunchError(str(exc).splitlines()[-1]) from exc


def truncate_l_logs(run_dir: Path) -> None:
    """Layout L opens its log files with "w" at every launch: a relaunch starts them empty."""
    for path in (run_dir / "logs").rglob("*.log"):
        path.write_bytes(b"")
