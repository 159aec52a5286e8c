"""Bounded step rows keep exactly what the collector's history would keep of the whole read."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

from rlagent.tools.steplines import StepLine
from rlagent.tools.steprows import StepLines, StepTable


def _rows(seed: int, steps: int) -> list[tuple[int, dict[str, float]]]:
    rng = random.Random(seed)
    out = []
    for step in range(1, steps + 1):
        values = {"loss": rng.random()}
        if step % 7 == 0:
            values["sparse"] = rng.random()  # a series logged now and then
        if step > 40:
            values["late"] = rng.random()  # a series that starts late
        if rng.random() < 0.1:
            values["loss"] = math.nan  # NaNs among the first values too
        out.append((step, values))
        if step % 3 == 0:
            out.append((step, {"extra": float(step)}))  # a second row of the same step
    return out


def _newest_and_early(table: dict[int, dict[str, float]], keep: int, early: int) -> tuple[dict, dict]:
    newest = {s: table[s] for s in sorted(table)[-keep:]}
    names = {n for row in table.values() for n in row}
    first = {n: [(s, table[s][n]) for s in sorted(table) if n in table[s] and math.isfinite(table[s][n])][:early] for n in names}
    leading = {n: [s for s in sorted(table) if n in table[s]][:early] for n in names}
    return newest, {"finite": first, "leading": {n: [(s, repr(table[s][n])) for s in v] for n, v in leading.items()}}


def test_step_table_keeps_the_newest_steps_and_every_series_first_values() -> None:
    for seed in range(5):
        whole: dict[int, dict[str, float]] = {}
        bounded = StepTable(keep=20, early=3)
        for step, values in _rows(seed, 300):
            whole.setdefault(step, {}).update(values)
            bounded.setdefault(step, {}).update(values)
        assert len(bounded) < 60
        assert _newest_and_early(bounded, 20, 3) == _newest_and_early(whole, 20, 3)


def test_series_that_start_or_turn_finite_long_after_the_others_keep_their_first_values() -> None:
    """Most rows of a long read are dropped without a look at their values once every series in
    them has its early values; a series new to the run, or still without finite values, must
    still be looked at."""
    for seed in range(5):
        rng = random.Random(seed)
        whole: dict[int, dict[str, float]] = {}
        bounded = StepTable(keep=20, early=3)
        for step in range(1, 2001):
            values = {"loss": rng.random()}
            if step > 1200:
                values["late"] = rng.random()  # begins after hundreds of rows were dropped
            values["nan_first"] = math.nan if step < 900 or rng.random() < 0.5 else rng.random()
            if step % 250 == 0:
                values["rare"] = rng.random()
            whole.setdefault(step, {}).update(values)
            bounded.setdefault(step, {}).update(values)
        assert len(bounded) < 80
        assert _newest_and_early(bounded, 20, 3) == _newest_and_early(whole, 20, 3)


def test_step_lines_merge_a_step_and_keep_the_newest_time() -> None:
    lines = StepLines(keep=10, early=2)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for step in range(1, 101):
        lines.append((StepLine(step=step, process="trainer", values={"loss": float(step)}), start + timedelta(seconds=step)))
    # a resume from step 50 after step 100: lower steps, newer times
    lines.append((StepLine(step=50, process="trainer", values={"loss": -1.0}), start + timedelta(seconds=500)))
    kept = {line.step: (line.values, when) for line, when in lines}
    assert len(kept) <= 25
    assert {1, 2, *range(91, 101)} <= set(kept)
    assert lines.newest["trainer"] == start + timedelta(seconds=500)
    assert kept[100] == ({"loss": 100.0}, start + timedelta(seconds=100))
