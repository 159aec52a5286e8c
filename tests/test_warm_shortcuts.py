"""The warm check-in's shortcuts give what the long way gives: medians computed back from the newest
step only as far as a streak goes, the newest points of a series read back from the newest step,
STATUS.md marker lines found by a bytes search instead of an anchored regex, and the first lines
of a rollouts file found without splitting all of it."""

from __future__ import annotations

import math
import os
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlagent.agents.rules.context import rolling_median, trailing, trailing_medians
from rlagent.models.observation import MetricHistory
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
