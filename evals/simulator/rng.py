"""Named, independent random streams.

Each draw site asks for its own stream, keyed by (seed, what, step, ...). Streams never share
state, so adding a draw in one place cannot shift numbers elsewhere, and step N's numbers do
not depend on how many steps were generated before it (which makes `append_run` exact).
String seeds go through SHA-512 in `random.Random`, so they are stable across processes.
"""

from __future__ import annotations

import math
import random


def stream(seed: int, *keys: object) -> random.Random:
    return random.Random(":".join([str(seed), *map(str, keys)]))


def lognormal(rng: random.Random, sigma: float) -> float:
    """A multiplicative noise factor with median 1."""
    return math.exp(rng.gauss(0.0, sigma))


def binomial(rng: random.Random, n: int, p: float) -> int:
    """Small-n binomial draw (n is at most a few thousand here)."""
    if p <= 0 or n <= 0:
        return 0
    if n > 200:
        mean, sd = n * p, math.sqrt(n * p * (1 - p))
        return max(0, min(n, round(rng.gauss(mean, sd))))
    return sum(rng.random() < p for _ in range(n))


def hexid(rng: random.Random, n: int = 32) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"
