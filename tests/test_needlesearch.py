"""Hyperscan and the bytes.find fallback find exactly the same candidate lines."""

import random
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from rlagent.tools import needlesearch
from rlagent.tools.logscan import NEEDLES

WORDS = [
    b"INFO",
    b"WARNING",
    b"ERROR",
    b"Error",
    b"rror",
    b"SUCCESS",
    b"Step ",
    b"NCCL",
    b"finished",
    b"x" * 40,
    b" ",
    b"Resuming",
    b"Evaluated",
    b"\xff\x00",
    b"\x1b[1m",
]


def random_log(rng: random.Random, lines: int) -> bytes:
    return b"".join(b"".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12))) + b"\n" for _ in range(lines))


def test_hyperscan_is_installed_here():
    # CI machines are x86_64 Linux, where the pinned wheel bundles the engine.
    assert needlesearch.hyperscan is not None


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 3000))
def test_both_searches_agree(seed, lines):
    buf = random_log(random.Random(seed), lines)
    expected = needlesearch.line_starts_by_find(buf, NEEDLES)
    assert needlesearch.line_starts(buf, NEEDLES) == expected
    for start in expected:
        line = buf[start : buf.index(b"\n", start)]
        assert any(n in line for n in NEEDLES)


def test_newlines_are_counted_alike_by_numpy_and_by_bytes_count(monkeypatch):
    rng = random.Random(5)
    buf = bytearray(random_log(rng, 4000))
    monkeypatch.setattr(needlesearch, "_NUMPY_FROM", 64)
    for _ in range(200):
        start = rng.randrange(len(buf))
        end = rng.randrange(start, len(buf) + 1)
        monkeypatch.setattr(needlesearch, "_counted", 0)
        plain = needlesearch.count_newlines(buf, start, end)
        monkeypatch.setattr(needlesearch, "_counted", needlesearch._NUMPY_AFTER)
        assert needlesearch.count_newlines(buf, start, end) == plain == buf[start:end].count(b"\n")


def test_numpy_is_imported_only_once_a_process_has_counted_a_long_read():
    """Its import costs about what its compare saves on a third of a GB: an `rlagent check` that
    reads a few new MB does without it; a cold read of gigabytes takes it after the first 256 MB."""
    import subprocess
    import sys

    probe = """
import sys
import rlagent.cli, rlagent.graph.runner, rlagent.agents.collector
from rlagent.tools import needlesearch
buf = bytearray(b"x\\n" * (1 << 20))
counts = [needlesearch.count_newlines(buf, 0, len(buf)) for _ in range(60)]  # 120 MB
print("numpy" in sys.modules)
counts += [needlesearch.count_newlines(buf, 0, len(buf)) for _ in range(80)]  # 280 MB in all
print("numpy" in sys.modules, set(counts) == {1 << 20})
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "True", "True"], done.stderr


def test_a_read_known_to_be_long_takes_numpy_from_its_first_mb():
    import subprocess
    import sys

    probe = """
import sys
from rlagent.tools import needlesearch
buf = bytearray(b"x\\n" * (1 << 20))
needlesearch.expect_read(200 << 20)
needlesearch.count_newlines(buf, 0, len(buf))
print("numpy" in sys.modules)
needlesearch.expect_read(256 << 20)
print(needlesearch.count_newlines(buf, 0, len(buf)) == 1 << 20, "numpy" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "True", "True"], done.stderr


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 3000), max_size=400), st.binary(max_size=40))
@example([0] * 200, b"")  # empty lines right where it switches to counting
@example([4000] * 70 + [0] * 200, b"\n")
def test_newlines_in_counts_what_bytes_count_counts(lengths, tail):
    """Long lines (found one by one), short ones (counted in one pass after the switch), and mixes."""
    data = b"".join(b"x" * n + b"\n" for n in lengths) + tail
    assert needlesearch.newlines_in(data) == data.count(b"\n")


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 3000), st.integers(0, 200))
def test_one_needles_ends_are_found_alike_by_hyperscan_and_bytes_find(seed, lines, start):
    rng = random.Random(seed)
    needle = b"Traceback (most recent call last):"
    buf = b"".join(rng.choice([*WORDS, needle, needle[:20], needle[10:]]) + b"\n" for _ in range(lines))
    start = min(start, len(buf))
    expected = [m.end() for m in re.finditer(re.escape(needle), buf[start:])]
    assert needlesearch.needle_ends(buf, start, len(buf), needle) == [start + e for e in expected]
    with_find = needlesearch.hyperscan
    try:
        needlesearch.hyperscan = None
        assert needlesearch.needle_ends(bytearray(buf), start, len(buf), needle) == [start + e for e in expected]
    finally:
        needlesearch.hyperscan = with_find
