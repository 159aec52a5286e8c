"""Finite metric series of a history table, carried from one check-in to the next.

The rules ask for about a dozen series of the 1000-step window at every check-in, and a warm
check-in adds a few steps to it: building each series from every row again was 2.6 ms of a 22 ms
check-in. A memo keeps each series it built with the rows it built it from; given the next
check-in's table, it keeps the points of the rows that are still there as the same objects and
builds points only from the others. So too the means of a series' windows (the reward level,
0.8 ms a check-in to build again) and the table's metric names (0.7 ms).

This is sound because a history row is replaced, never changed in place (agents/collector
`_update_row`): a row object still in the table still holds the values its points came from. A
history read back from the store has new row objects, so its memo finds nothing to keep.
"""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Callable, Hashable, Iterable

Point = tuple[int, float]
"""(step, value) of one metric."""
Row = dict[str, float]
Table = dict[int, Row]
PointOf = Callable[[int, Row], float | None]
"""A step's point from its row alone (None: no point at that step)."""


def step_of(point: Point) -> int:
    return point[0]


def finite_points(steps: list[int], rows: list[Row], metric: str) -> list[Point]:
    return [(s, v) for s, row in zip(steps, rows, strict=True) if (v := row.get(metric)) is not None and math.isfinite(v)]


def derived_points(steps: list[int], rows: list[Row], point_of: PointOf) -> list[Point]:
    return [(s, v) for s, row in zip(steps, rows, strict=True) if (v := point_of(s, row)) is not None]


def window_means(points: list[Point], window: int, first: int = 0) -> list[Point]:
    """(last step, mean) of each full `window` of consecutive points, the window beginning at
    points[first] and after: fsum / n, what statistics.fmean computes, without its per-call checks."""
    values = [v for _, v in points[first:]]
    return [
        (points[first + i + window - 1][0], math.fsum(values[i : i + window]) / window) for i in range(len(values) - window + 1)
    ]


def _count_names(counts: dict[str, int], rows: Iterable[Row], by: int) -> None:
    for row in rows:
        for name in row:
            counts[name] = counts.get(name, 0) + by


class TableSeries:
    """The series of one table (finite values of a metric, or points derived from each row), as of
    the table it was last `sync`ed with."""

    __slots__ = ("_derived", "_means", "_name_counts", "_names", "_series", "rows", "steps")

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.rows: list[Row] = []
        self._series: dict[str, list[Point]] = {}
        self._derived: dict[Hashable, tuple[PointOf, list[Point]]] = {}
        self._means: dict[tuple[str, int], list[Point]] = {}
        """(metric, window) -> `window_means` of the metric's series from its first point, for the
        windows built so far: a prefix of them, longer as they are asked for."""
        self._name_counts: dict[str, int] | None = None
        """Metric name -> rows holding it (once asked for)."""
        self._names: set[str] | None = None

    def sync(self, table: Table) -> None:
        """Align with `table`: each series keeps its points of the leading rows that are unchanged
        (the same step holding the same row object) and gets new points from the rows after them."""
        steps = sorted(table)
        rows = [table[s] for s in steps]
        start = bisect.bisect_left(self.steps, steps[0]) if steps else 0
        n = min(len(steps), len(self.steps) - start)
        same = list(
            map(
                operator.and_,
                map(operator.eq, self.steps[start : start + n], steps),
                map(operator.is_, self.rows[start : start + n], rows),
            )
        )
        kept = same.index(False) if False in same else n
        self._names = None
        if kept == 0:
            self._series, self._derived, self._means, self._name_counts = {}, {}, {}, None
        else:
            first, last = steps[0], steps[kept - 1]
            new_steps, new_rows = steps[kept:], rows[kept:]

            def kept_points(points: list[Point]) -> list[Point]:
                return points[bisect.bisect_left(points, first, key=step_of) : bisect.bisect_right(points, last, key=step_of)]

            def kept_means(metric: str, means: list[Point]) -> list[Point]:
                # The means whose windows lie in the kept points: the window beginning at the series'
                # first kept point, and those after it, up to the window ending at its last one.
                points = self._series[metric]
                return means[bisect.bisect_left(points, first, key=step_of) : bisect.bisect_right(means, last, key=step_of)]

            self._means = {(metric, window): kept_means(metric, means) for (metric, window), means in self._means.items()}
            self._series = {
                metric: [*kept_points(points), *finite_points(new_steps, new_rows, metric)]
                for metric, points in self._series.items()
            }
            self._derived = {
                key: (point_of, [*kept_points(points), *derived_points(new_steps, new_rows, point_of)])
                for key, (point_of, points) in self._derived.items()
            }
            if self._name_counts is not None:
                _count_names(self._name_counts, [*self.rows[:start], *self.rows[start + kept :]], -1)
                _count_names(self._name_counts, new_rows, 1)
        self.steps, self.rows = steps, rows

    def finite(self, metric: str) -> list[Point]:
        """The metric's finite (step, value) points in step order. The list is shared: do not change it."""
        points = self._series.get(metric)
        if points is None:
            points = self._series[metric] = finite_points(self.steps, self.rows, metric)
        return points

    def means(self, metric: str, window: int) -> list[Point]:
        """`window_means` of the metric's finite series (full windows only, `window` >= 1). The list
        is shared: do not change it."""
        points = self.finite(metric)
        known = self._means.get((metric, window), [])
        if len(known) + window <= len(points):  # windows not built yet
            known = [*known, *window_means(points, window, len(known))]
        self._means[metric, window] = known
        return known

    def names(self) -> set[str]:
        """Every metric name in the table's rows. The set is shared: do not change it."""
        if self._names is None:
            if self._name_counts is None:
                self._name_counts = {}
                _count_names(self._name_counts, self.rows, 1)
            self._names = {name for name, rows in self._name_counts.items() if rows}
        return self._names

    def derived(self, key: Hashable, point_of: PointOf) -> list[Point]:
        """(step, point_of(step, row)) of every row where it is not None, in step order. `key` names
        what `point_of` computes: the first function given for a key is the one kept."""
        known = self._derived.get(key)
        if known is None:
            known = self._derived[key] = (point_of, derived_points(self.steps, self.rows, point_of))
        return known[1]


class SeriesMemo:
    """One `TableSeries` per table name; a history carries its memo to its successor."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        self._tables: dict[str, TableSeries] = {}

    def synced(self, name: str, table: Table) -> TableSeries:
        series = self._tables.get(name)
        if series is None:
            series = self._tables[name] = TableSeries()
        series.sync(table)
        return series
