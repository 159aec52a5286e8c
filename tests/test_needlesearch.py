"""Hyperscan and the bytes.find fallback find exactly the same candidate lines."""

import random

from hypothesis import given, settings
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
