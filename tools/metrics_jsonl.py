"""Layout H's `metrics.jsonl`: trainer (5 rows per step) and orchestrator rows, interleaved.

prime-rl drops non-finite values from this file (the log is the only witness of a NaN), so
rows here refine the log's rounded numbers but never erase a NaN the log showed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import orjson

from rlagent.models.observation import EvalPoint, FileCursor
from rlagent.tools.bounds import NUMBER, plausible_step, plausible_time
from rlagent.tools.metric_names import canonical_plan, canonical_values, eval_scores, is_orchestrator_row
from rlagent.tools.steprows import StepTable
from rlagent.tools.tail import iter_complete_lines, plan_read

REL = "metrics.jsonl"
CLOCK_SKEW_S = 300.0
"""A row may be stamped this much after the file's mtime (the writer's clock against the file server's)."""


@dataclass
class MetricsRead:
    cursor: FileCursor | None
    trainer: dict[int, dict[str, float]] = field(default_factory=StepTable)
    orchestrator: dict[int, dict[str, float]] = field(default_factory=StepTable)
    """Bounded to what the history keeps (tools.steprows)."""
    evals: list[EvalPoint] = field(default_factory=list)
    times: dict[str, float] = field(default_factory=dict)
    """process -> unix time of its newest row."""
    bytes_read: int = 0
    notes: list[str] = field(default_factory=list)
    out_of_range: int = 0
    """Rows skipped for a step or time no run writes (1e300, the year 5138, after the file was written)."""
    latest: float = float("inf")
    """No row can be stamped later than the file was last written (its mtime, give or take)."""


def read_metrics(run_dir: Path, cursor: FileCursor | None) -> MetricsRead:
    path = run_dir / REL
    try:
        plan, new_cursor = plan_read(path, REL, cursor)
    except FileNotFoundError:
        return MetricsRead(None)
    except OSError as exc:
        return MetricsRead(cursor, notes=[f"{REL}: unreadable ({exc.strerror or exc})"])
    out = MetricsRead(new_cursor, latest=plan.mtime + CLOCK_SKEW_S)
    if plan.note:
        out.notes.append(plan.note)
    bad = 0
    first_bad = 0
    end, count = plan.start, 0
    try:
        for index, (offset, raw) in enumerate(iter_complete_lines(path, plan.start, plan.end)):
            end, count = offset, index + 1
            bad, first_bad = _take_row(raw, plan.first_line + index, out, bad, first_bad)
    except OSError as exc:
        out.notes.append(f"{REL}: read failed ({exc.strerror or exc})")
    new_cursor.offset = end
    new_cursor.lines = plan.first_line - 1 + count
    out.bytes_read = end - plan.start
    if bad:
        out.notes.append(f"{REL}: skipped {bad} malformed row(s), first at line {first_bad}")
    if out.out_of_range:
        out.notes.append(f"{REL}: skipped {out.out_of_range} row(s) with an out-of-range step or time")
    return out


@lru_cache(maxsize=64)
def _row_plan(keys: tuple[str, ...]) -> tuple[bool, bool, tuple[tuple[str, str], ...]]:
    """What a row with these keys (in this order) is: (an eval row, an orchestrator row, what
    it maps to canonical names). A run writes rows of a few shapes with hundreds of keys; each
    shape is worked out once."""
    is_eval = any(k.startswith("eval/") for k in keys)
    orchestrator = is_orchestrator_row(dict.fromkeys(keys))
    return is_eval, orchestrator, canonical_plan(keys, orchestrator)


def _take_row(raw: bytes, line_no: int, out: MetricsRead, bad: int, first_bad: int) -> tuple[int, int]:
    """Fold one row into `out`; returns the updated (bad rows, first bad line)."""
    try:
        row = orjson.loads(raw)
        step = row["step"]
        if not isinstance(step, NUMBER) or step.__class__ is bool or not math.isfinite(step):
            raise ValueError("step")
    except (orjson.JSONDecodeError, ValueError, KeyError, TypeError):
        return bad + 1, first_bad or line_no
    stamp = row.get("time")
    numeric_time = isinstance(stamp, NUMBER) and stamp.__class__ is not bool
    if not plausible_step(step) or (numeric_time and not (plausible_time(stamp) and stamp <= out.latest)):
        out.out_of_range += 1
        return bad, first_bad
    is_eval, orchestrator, plan = _row_plan(tuple(row))
    if (isinstance(step, float) and not step.is_integer()) or is_eval:
        for env, score in eval_scores(row).items():
            out.evals.append(EvalPoint(env=env, step=int(step), score=score))
        return bad, first_bad
    values = canonical_values(row, plan)
    process = "orchestrator" if orchestrator else "trainer"
    target = out.orchestrator if orchestrator else out.trainer
    if values:
        target.setdefault(int(step), {}).update(values)
    if numeric_time:
        out.times[process] = max(out.times.get(process, 0.0), float(stamp))
    return bad, first_bad
