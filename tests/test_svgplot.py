"""Downsampling a plotted series: bounded, in step order, and no spike or dip lost."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from rlagent.tools.svgplot import MAX_POINTS, downsample


def test_a_short_series_is_drawn_whole():
    points = [(s, float(s % 7)) for s in range(MAX_POINTS)]
    assert downsample(points) == points


def test_a_long_series_keeps_each_buckets_lowest_and_highest_point_in_step_order():
    rng = random.Random(7)
    points = [(s, rng.gauss(1.0, 0.05)) for s in range(1, 1001)]
    points[617] = (618, 40.0)  # one grad-norm spike
    points[233] = (234, -3.0)  # one dip
    kept = downsample(points)
    assert len(kept) <= MAX_POINTS
    assert [s for s, _ in kept] == sorted({s for s, _ in kept})
    assert (618, 40.0) in kept and (234, -3.0) in kept
    buckets = MAX_POINTS // 2
    for b in range(buckets):
        chunk = points[b * len(points) // buckets : (b + 1) * len(points) // buckets]
        low, high = min(v for _, v in chunk), max(v for _, v in chunk)
        values = [v for s, v in kept if chunk[0][0] <= s <= chunk[-1][0]]
        assert min(values) == low and max(values) == high and len(values) <= 2


def test_a_flat_bucket_keeps_its_first_point_once():
    points = [(s, 2.0) for s in range(10)]
    assert downsample(points, limit=4) == [(0, 2.0), (5, 2.0)]


def _downsample_bucket_by_bucket(points, limit=MAX_POINTS):
    """The plain loop the fast version replaced: the oracle."""
    if len(points) <= limit:
        return list(points)
    buckets = max(1, limit // 2)
    size = len(points) / buckets
    out = []
    for b in range(buckets):
        start, end = int(b * size), int((b + 1) * size)
        if start == end:
            continue
        chunk = points[start:end]
        low = min(range(len(chunk)), key=lambda i: chunk[i][1])
        high = max(range(len(chunk)), key=lambda i: (chunk[i][1], -i))
        out.append(chunk[min(low, high)])
        if low != high:
            out.append(chunk[max(low, high)])
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-5, 5, allow_nan=False) | st.sampled_from([0.0, 1.0]), max_size=1500), st.integers(2, 500))
def test_downsampling_keeps_the_points_a_bucket_by_bucket_loop_keeps(values, limit):
    points = [(s, v) for s, v in enumerate(values)]
    assert downsample(points, limit) == _downsample_bucket_by_bucket(points, limit)
