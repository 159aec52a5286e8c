"""Read facts back from a run's files: one log line by its number, a metric at a step, the newest
step. The evidence auditor and the restart verification use these to check claims on disk
instead of trusting what an earlier read (or an LLM) said.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

from rlagent.models.run import Layout
from rlagent.tools.layout import log_files, process_of
from rlagent.tools.loglines import clean, parse_head
from rlagent.tools.rollouts import l_step_fractions
from rlagent.tools.steplines import StepLine, parse_step_line


def inside(run_dir: Path, rel: str) -> Path | None:
    """`run_dir/rel` if it stays inside the run dir (a claim cannot point elsewhere)."""
    try:
        root = run_dir.resolve()
        path = (root / rel).resolve()
        return path if path.is_relative_to(root) and path.is_file() else None
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError in Python 3.11), an unreadable dir
        return None


def line_at(path: Path, number: int) -> str | None:
    """Line `number` (1-based), control sequences and rank prefix stripped; None past the end."""
    try:
        with open(path, "rb") as f:
            for index, raw in enumerate(f, 1):
                if index == number:
                    return clean(raw)
    except OSError:
        return None
    return None


def step_lines(path: Path, process: str, start: int = 0) -> Iterator[StepLine]:
    """Step lines of one process's log, from byte offset `start`."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            for raw in f:
                head = parse_head(clean(raw))
                if head is None:
                    continue
                line = parse_step_line(head.message, process)
                if line is not None and line.process == process:
                    yield line
    except OSError:
        return


def process_logs(run_dir: Path, layout: Layout, process: str) -> list[Path]:
    return [p for p in log_files(run_dir, layout) if process_of(str(p.relative_to(run_dir))) == process]


def metric_on_disk(run_dir: Path, layout: Layout, process: str, metric: str, step: int) -> float | None:
    """The value a step line of the current logs gives (L truncation/error: the rollouts file)."""
    found: float | None = None
    for path in process_logs(run_dir, layout, process):
        for line in step_lines(path, process):
            if line.step == step and metric in line.values:
                found = line.values[metric]
    if found is None and layout is Layout.L and metric in ("truncation", "error"):
        found = l_step_fractions(run_dir, step - 1).get(step, {}).get(metric)
    return found


def newest_step(path: Path, process: str, start: int = 0) -> int | None:
    steps = [line.step for line in step_lines(path, process, start)]
    return max(steps) if steps else None


def same_value(a: float, b: float, rel: float = 1e-3) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12) + 1e-9
