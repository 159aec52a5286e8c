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

_STEP_DIR = re.compile(r"^step_(\d+)$")


def _steps(base: Path) -> dict[int, Path]:
    if not base.is_dir():
        return {}
    return {int(m.group(1)): d for d in base.iterdir() if (m := _STEP_DIR.match(d.name)) and d.is_dir()}


def checkpoint_parts(run_dir: Path, layout: Layout, newest: int = 3) -> dict[int, list[str]]:
    """The newest `newest` checkpoint steps -> the parts present (`trainer`, `orchestrator`)."""
    trainer_dirs = _steps(run_dir / "checkpoints")
    orch_base = run_dir / ("checkpoints" if layout is Layout.H else "run_default/checkpoints")
    orch_dirs = _steps(orch_base)
    parts: dict[int, list[str]] = {}
    for step in sorted(set(trainer_dirs) | set(orch_dirs), reverse=True)[:newest]:
        present = []
        if step in trainer_dirs and (trainer_dirs[step] / "trainer" / ".metadata").is_file():
            present.append("trainer")
        if step in orch_dirs and (orch_dirs[step] / "orchestrator" / "progress.pt").is_file():
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
