"""The warm check-in's shortcuts give what the long way gives: medians computed back from the newest
step only as far as a streak goes, streak searches that stop where no earlier start can win, grad-norm
spikes looked for back from the newest step, the newest points of a series read back from the newest step,
STATUS.md marker lines found by a bytes search instead of an anchored regex, and the first lines
of a rollouts file found without splitting all of it."""

from __future__ import annotations

import math
import os
import re
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_rules import healthy

from rlagent.agents.rules.context import median, rolling_median, streak_vs_reference, trailing, trailing_medians
from rlagent.agents.rules.stability import grad_norm_spike
from rlagent.models.observation import MetricHistory
from rlagent.models.series_memo import window_means
from rlagent.tools.rollouts import head_and_count
from rlagent.tools.safefs import read_up_to
from rlagent.tools.statusfile import _MARKER, _has_line, written_versions

values = st.floats(min_value=-2.0, max_value=2.0, allow_nan=False) | st.sampled_from([0.0, -0.0, 0.5, 0.6, 1.0])


@settings(max_examples=300, deadline=None)
@given(st.lists(values, max_size=60), st.integers(1, 8), st.floats(-1.0, 1.0))
def test_trailing_medians_are_the_trailing_run_of_the_rolling_median(series, k, line):
    points = [(s * 3 + 1, v) for s, v in enumerate(series)]
    smoothed = list(zip((s for s, _ in points), rolling_median([v for _, v in points], k), strict=True))[k - 1 :]
    assert trailing_medians(points, k, lambda v: v > line) == trailing(smoothed, lambda v: v > line)


cells = st.none() | st.floats(allow_nan=True, allow_infinity=True, width=32)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.integers(0, 200), st.lists(cells, min_size=2, max_size=2), max_size=60), st.integers(1, 30))
def test_the_newest_points_are_the_end_of_the_whole_series(rows, n):
    history = MetricHistory(
        trainer={s: {name: v for name, v in zip(("a", "b"), row, strict=True) if v is not None} for s, row in rows.items()}
    )
    for metric in ("a", "b", "missing"):
        whole = history.series("trainer", metric)
        assert _alike(history.recent("trainer", metric, n), whole[-n:])
        assert _alike(history.recent("trainer", metric, n, finite=True), [p for p in whole if math.isfinite(p[1])][-n:])


def _alike(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    return [(s, repr(v)) for s, v in a] == [(s, repr(v)) for s, v in b]


MARK = "<!-- rlagent:checkin 0a1b run-abc.1234#7 -->"
pieces = st.sampled_from(
    [MARK, MARK + " ", " " + MARK, MARK.replace("#7", "#70"), "<!-- rlagent:checkin run-abc.1234#7 -->", "text", "", "\r"]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(pieces, max_size=8), st.sampled_from(["\n", "\n\n", "\r\n"]))
def test_a_marker_is_found_exactly_where_it_is_a_whole_line(parts, newline):
    tail = newline.join(parts).encode()
    line = MARK.encode()
    assert _has_line(tail, line) == (re.search(rb"(?:^|\n)" + re.escape(line) + rb"(?:\n|$)", tail) is not None)


@settings(max_examples=200, deadline=None)
@given(st.lists(pieces, max_size=8))
def test_written_versions_are_the_digests_of_this_ids_marker_lines(tmp_path_factory, parts):
    path = tmp_path_factory.mktemp("status") / "STATUS.md"
    text = "\n".join(parts).encode()
    path.write_bytes(text)
    expected = [(m.group(1) or b"").decode() for m in _MARKER.finditer(text) if m.group(2) == b"run-abc.1234#7"]
    assert written_versions(path, "run-abc.1234", 7) == expected


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.sampled_from([b"\n", b"\r", b"\r\n", b"{}", b'{"a": 1}', b"x", b""]), max_size=30),
    st.integers(0, 8),
    st.booleans(),
)
def test_the_first_rollout_lines_and_their_count_are_what_splitlines_gives(pieces, n, cut):
    data = b"".join(pieces)
    lines = data.splitlines()
    lines = lines[:-1] if cut and lines else lines
    assert head_and_count(data, n, cut=cut) == (lines[:n], len(lines))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 400), st.binary(max_size=50))
def test_a_read_sized_to_the_file_reads_what_a_plain_read_reads(tmp_path_factory, data, limit, grown):
    path = tmp_path_factory.mktemp("read") / "f"
    path.write_bytes(data + grown)
    stale = os.stat_result((0o100644, 0, 0, 1, 0, 0, len(data), 0, 0, 0))
    with open(path, "rb") as f, pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fstat", lambda fd: stale)  # the file grew after its size was taken: read on
        assert read_up_to(f, limit) == (data + grown)[:limit]


def _streak_vs_reference_whole(points, ratio, *, below, window, min_ref):
    """The search before it learned to stop: every start, against the full rolling median (the oracle)."""
    values = [v for _, v in points]
    extreme = list(values)
    for i in range(len(values) - 2, -1, -1):
        extreme[i] = max(extreme[i], extreme[i + 1]) if below else min(extreme[i], extreme[i + 1])
    best = None
    refs = rolling_median(values[: len(values) - 1], window)
    for start in range(len(values) - 1, min_ref - 1, -1):
        ref = refs[start - 1]
        limit = ratio * ref
        if (extreme[start] < limit) if below else (extreme[start] > limit):
            best = (start, ref)
    return (list(points[best[0] :]), best[1]) if best else None


levels = st.lists(st.tuples(st.integers(1, 40), st.floats(0.5, 200.0)), min_size=1, max_size=6)


@settings(max_examples=400, deadline=None)
@given(levels, st.sampled_from([0.5, 1.5]), st.booleans(), st.integers(3, 20), st.integers(1, 5), st.randoms())
def test_a_streak_search_that_stops_early_finds_the_streak_a_full_search_finds(segments, ratio, below, window, min_ref, rng):
    # Plateaus with noise: a run that steps down (a collapse) or up (a slowdown) and back.
    values = [level * rng.uniform(0.8, 1.2) for length, level in segments for _ in range(length)]
    points = [(s + 1, v) for s, v in enumerate(values)]
    found = streak_vs_reference(points, ratio, below=below, window=window, min_ref=min_ref)
    assert found == _streak_vs_reference_whole(points, ratio, below=below, window=window, min_ref=min_ref)


def _spike_runs_whole(points, t):
    """Every run of grad-norm spikes over the whole series, the recent ones kept (the oracle)."""
    values = [v for _, v in points]
    runs, current = [], []
    for i, (s, v) in enumerate(points):
        before = values[max(0, i - t.rolling_window) : i]
        ref = median(before) if len(before) >= t.min_baseline_points else None
        if s > t.warmup_steps and ref is not None and ref > 0 and v > t.grad_spike_ratio * ref:
            current.append(s)
            continue
        if current:
            runs.append(current)
        current = []
    if current:
        runs.append(current)
    last = points[-1][0] if points else 0
    return [r for r in runs if len(r) >= t.grad_spike_steps and r[-1] > last - t.recent_steps]


@settings(max_examples=200, deadline=None)
@given(st.integers(20, 160), st.lists(st.tuples(st.integers(0, 159), st.integers(1, 4)), max_size=6), st.randoms())
def test_spikes_looked_for_back_from_the_newest_step_are_the_ones_a_whole_scan_finds(n, spikes, rng):
    run = healthy(seed=rng.randint(0, 9), n=n)
    for start, length in spikes:
        run.set("trainer", "grad_norm", lambda s: 40.0, [s for s in range(start, start + length) if s in run.trainer])
    ctx = run.ctx()
    runs = _spike_runs_whole(ctx.series("trainer", "grad_norm"), ctx.thresholds)
    found = grad_norm_spike(ctx)
    if not runs:
        assert found is None
    else:
        assert (found.first_step, found.last_step) == (runs[-1][0], runs[-1][-1])
        counted = f"({len(runs)} such spikes in the last"
        assert (counted in found.summary) if len(runs) > 1 else ("such spikes" not in found.summary)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), max_size=60), st.integers(1, 12))
def test_reward_levels_are_the_fmean_of_each_full_window(series, window):
    points = [(s * 2 + 1, v) for s, v in enumerate(series)]
    values = [v for _, v in points]
    want = [(points[i][0], statistics.fmean(values[i - window + 1 : i + 1])) for i in range(window - 1, len(points))]
    assert window_means(points, window) == want  # bit for bit: thresholds are compared exactly
    for first in range(len(points) + 1):  # the windows a memo has not built yet
        assert window_means(points, window, first) == want[first:]
