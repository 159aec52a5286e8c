"""Writing a SIMULATED framework run to disk (offline): one attempt, or the next attempt of a run from its
newest checkpoint (what a relaunch with the framework's resume flag does).

Files get the simulated times as mtimes. `Growth` (optional) records what a replay needs for files that
carry no time of their own (verl's and TRL's consoles): each file's size after each write.
"""

from __future__ import annotations

import json
import math
import shutil
from datetime import UTC, datetime
from pathlib import Path

from .common import Growth, Plan, apply_plan, clock_for
from .scenario import FrameworkScenario

PARAMS_FILE = ".rlagent-simulator.json"
"""The scenario of a run written by `rlagent simulate` (so a relaunch continues the same run)."""


class FrameworkLaunchError(Exception):
    """A launch the framework would refuse, or one that would silently start over; one line for the user."""


def plan_for(sc: FrameworkScenario, rate: float = 1.0) -> Plan:
    if sc.framework == "verl":
        from .verl import verl_plan

        return verl_plan(sc, rate)
    if sc.framework == "trl":
        from .trl import trl_plan

        return trl_plan(sc, rate)
    from .openrlhf import openrlhf_plan

    return openrlhf_plan(sc, rate)


def resume_point(root: Path, sc: FrameworkScenario, requested: str | None = None) -> int | None:
    """The checkpoint step the framework's resume reads: verl's tracker, TRL's newest `checkpoint-N` (or
    the one given), OpenRLHF's `_actor/latest`. None: nothing to resume from."""
    if sc.framework == "verl":
        from .verl import resume_point as verl_point

        return verl_point(root, sc)
    if sc.framework == "trl":
        from .trl import resume_point as trl_point

        return trl_point(root, sc, requested)
    from .openrlhf import resume_point as openrlhf_point

    return openrlhf_point(root, sc)


def write_framework_run(
    sc: FrameworkScenario, out: str | Path, *, overwrite: bool = False, growth: Growth | None = None
) -> tuple[Path, Plan]:
    """Write attempt `sc` into `out` (a fresh directory unless `sc` resumes a run already there)."""
    root = Path(out)
    if sc.attempt == 1:
        if root.exists() and any(root.iterdir()):
            if not overwrite:
                raise FrameworkLaunchError(f"{root} is not empty: pass --overwrite to replace it, or resume it")
            shutil.rmtree(root)
        root.mkdir(parents=True, exist_ok=True)
    plan = plan_for(sc)
    clock = clock_for(sc.start)
    apply_plan(plan, root, clock, growth)
    if growth is not None:
        growth.attempts.append(
            {
                "attempt": sc.attempt,
                "resume_step": sc.resume_step,
                "start": round(clock.epoch(0), 3),
                "end": round(clock.epoch(plan.end), 3),
                "exit_code": plan.exit_code,
                "failing": plan.failing,
                "failing_code": plan.failing_code if plan.failing else None,
            }
        )
    return root, plan


def next_attempt(
    sc: FrameworkScenario, root: Path, step: int, *, gap_s: float = 90.0, steps: int | None = None
) -> FrameworkScenario:
    """The scenario of the relaunch of `sc`'s run from checkpoint `step`, starting `gap_s` after the
    newest file of the run was written."""
    newest = max((p.stat().st_mtime for p in root.rglob("*") if p.is_file()), default=sc.start.timestamp())
    start = datetime.fromtimestamp(math.floor(newest + gap_s), UTC)
    last = steps if steps is not None else sc.max_steps
    return sc.variant(
        attempt=sc.attempt + 1,
        resume_step=step,
        start=start,
        steps=max(last, step + 1),
        finished=sc.finished and max(last, step + 1) == sc.max_steps,
    )


def load_params(root: Path) -> dict | None:
    """The scenario saved by `rlagent simulate` in a run directory (None: not one of its runs)."""
    path = root / PARAMS_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except ValueError:
        return None
    return data if isinstance(data, dict) and "framework" in data else None
