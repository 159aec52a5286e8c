"""Which checkpoint steps exist and whether they are complete (the other frameworks' adapters list
theirs in the same shape: step -> parts present).

Trainer and orchestrator save independently: a step is complete only with BOTH
`trainer/.metadata` and `orchestrator/progress.pt`. L keeps the orchestrator's part under
`run_default/checkpoints/`.
"""

from __future__ import annotations

import re
from pathlib import Path

from rlagent.models.run import Layout
from rlagent.tools.bounds import STEP_DIGITS
from rlagent.tools.safefs import is_dir, is_file, list_dir

_STEP_DIR = re.compile(rf"^step_({STEP_DIGITS})$")


def _steps(base: Path, notes: list[str] | None, root: Path) -> dict[int, Path]:
    return {int(m.group(1)): d for d in list_dir(base, notes, root) if (m := _STEP_DIR.match(d.name)) and is_dir(d, notes, root)}


def checkpoint_parts(run_dir: Path, layout: Layout, newest: int = 3, notes: list[str] | None = None) -> dict[int, list[str]]:
    """The newest `newest` checkpoint steps -> the parts present (`trainer`, `orchestrator`).

    A directory that cannot be read counts as absent, and becomes one of `notes` when given."""
    trainer_dirs = _steps(run_dir / "checkpoints", notes, run_dir)
    orch_base = run_dir / ("checkpoints" if layout is Layout.H else "run_default/checkpoints")
    orch_dirs = trainer_dirs if orch_base == run_dir / "checkpoints" else _steps(orch_base, notes, run_dir)
    parts: dict[int, list[str]] = {}
    for step in sorted(set(trainer_dirs) | set(orch_dirs), reverse=True)[:newest]:
        present = []
        if step in trainer_dirs and is_file(trainer_dirs[step] / "trainer" / ".metadata", notes, run_dir):
            present.append("trainer")
        if step in orch_dirs and is_file(orch_dirs[step] / "orchestrator" / "progress.pt", notes, run_dir):
            present.append("orchestrator")
        parts[step] = present
    return parts


PRIME_PARTS = frozenset({"trainer", "orchestrator"})


def is_complete(present: list[str]) -> bool:
    """prime-rl: both parts. verl, TRL, OpenRLHF: whatever parts their adapter found, unless it marked the
    checkpoint `incomplete` (tools/adapters)."""
    if not present or "incomplete" in present:
        return False
    prime = PRIME_PARTS & set(present)
    return not prime or prime == PRIME_PARTS


def newest_complete(parts: dict[int, list[str]]) -> int | None:
    complete = [step for step, present in parts.items() if is_complete(present)]
    return max(complete) if complete else None
