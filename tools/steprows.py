"""Per-step metric rows held bounded while a long history is read.

A cold read of a run with 100,000 steps would otherwise hold every step line and metrics.jsonl
row until the collector trims its history to the newest KEEP_STEPS steps. What the collector
keeps of those rows is the newest KEEP_STEPS steps of each table and each series' first
EARLY_VALUES finite values (the early baseline, agents/collector `_refresh_early`); rows that
can be neither are dropped as they fall out, so the read holds at most about 2 x KEEP_STEPS rows
per table plus the few early ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from rlagent.tools.steplines import StepLine

KEEP_STEPS = 1000
"""Steps of each table kept: the collector's history window (HISTORY_STEPS)."""
EARLY_VALUES = 10
"""Values kept at the start of each series: the collector's early baseline (EARLY_VALUES)."""


class StepTable(dict[int, dict[str, float]]):
    """step -> values, filled with `setdefault(step, {}).update(values)` as rows arrive in step order.

    Once it holds 2 x `keep` steps, the oldest are dropped down to the newest `keep`, except a step
    holding one of a series' first `early` values, or first `early` finite ones: that way the newest
    `keep` steps and every series' first `early` finite values are exactly those of the whole
    read, and so is a NaN among the first values (which hides a later file's value for its step).
    Rows more than `keep` steps out of order may be judged before they are complete.
    """

    def __init__(self, keep: int = KEEP_STEPS, early: int = EARLY_VALUES) -> None:
        super().__init__()
        self.keep, self.early = keep, early
        self.pinned: set[int] = set()
        self._seen: dict[str, int] = {}  # series -> values in the steps judged so far
        self._finite: dict[str, int] = {}
        self._done: set[str] = set()  # series with `early` values and `early` finite ones judged: none pins a step

    def setdefault(self, step: int, default: dict[str, float]) -> dict[str, float]:  # type: ignore[override]
        if step not in self and len(self) - len(self.pinned) >= 2 * self.keep:
            self._drop_old()
        return super().setdefault(step, default)

    def _drop_old(self) -> None:
        old = sorted(s for s in self if s not in self.pinned)[: -self.keep]
        seen, finite, early, done = self._seen, self._finite, self.early, self._done
        for step in old:
            row = self[step]
            if row.keys() <= done:  # a long read's usual row: nothing in it can be an early value any more
                del self[step]
                continue
            needed = False
            for name, value in row.items():
                n = seen.get(name, 0)
                seen[name] = n + 1
                needed = needed or n < early
                if math.isfinite(value):
                    n = finite.get(name, 0)
                    finite[name] = n + 1
                    needed = needed or n < early
                if seen[name] >= early and finite.get(name, 0) >= early:
                    done.add(name)
            if needed:
                self.pinned.add(step)
            else:
                del self[step]


class StepLines:
    """A log's step lines as (StepLine, time of the line), as a list of them would give, bounded like
    StepTable: the lines of one step are merged into one (values in line order, the latest time)."""

    def __init__(self, keep: int = KEEP_STEPS, early: int = EARLY_VALUES) -> None:
        self.keep, self.early = keep, early
        self._tables: dict[str, StepTable] = {}
        self._when: dict[tuple[str, int], datetime] = {}
        self.newest: dict[str, datetime] = {}
        """process -> time of its newest step line, dropped ones included."""

    def append(self, item: tuple[StepLine, datetime | None]) -> None:
        line, when = item
        self.add(line.process, line.step, line.values, when)

    def add(self, process: str, step: int, values: dict[str, float], when: datetime | None) -> None:
        """append((StepLine(step, process, values), when)), without making the StepLine."""
        table = self._tables.get(process)
        if table is None:
            table = self._tables[process] = StepTable(self.keep, self.early)
        table.setdefault(step, {}).update(values)
        if when is not None:
            key = (process, step)
            if key not in self._when or when > self._when[key]:
                self._when[key] = when
            if process not in self.newest or when > self.newest[process]:
                self.newest[process] = when
            held = len(self._when)
            if held > 4 * self.keep and held > 4 * self.keep + sum(len(t.pinned) for t in self._tables.values()):
                self._when = {k: w for k, w in self._when.items() if k[1] in self._tables[k[0]]}

    def retime(self, to_time: Callable[[Any], datetime]) -> None:
        """Map the times kept through `to_time` (a reader that dates its lines once the read is done
        appends them as moments: tools.logread)."""
        self._when = {key: to_time(when) for key, when in self._when.items()}
        self.newest = {process: to_time(when) for process, when in self.newest.items()}

    def __iter__(self) -> Iterator[tuple[StepLine, datetime | None]]:
        for process, table in self._tables.items():
            for step, values in table.items():
                yield StepLine(step=step, process=process, values=values), self._when.get((process, step))

    def __len__(self) -> int:
        return sum(len(t) for t in self._tables.values())
