"""What a number read from a run may be: anything outside these bounds is junk, noted and skipped.

Beyond them a value breaks what is built from it: `datetime.fromtimestamp(1e300)` raises, a
time of 1e11 dates an entry in the year 5138, and an integer beyond 64 bits cannot be saved in
the state store (its serializer refuses it), which would fail every later check-in.
"""

from __future__ import annotations

import math

MAX_STEP = 10**9
"""No run takes a billion optimizer steps; step numbers past this are junk."""
STEP_DIGITS = r"\d{1,9}"
"""A regex for a step number within MAX_STEP (used where steps are parsed from names and lines)."""
EARLIEST = 0.0
"""The unix epoch: a negative time is junk."""
LATEST = 4_102_444_800.0
"""2100-01-01 UTC."""
NUMBER = (int, float)
"""For isinstance on hot paths: `int | float` builds a new union at every call (a metrics row has
hundreds of values). bool is an int: callers that mean numbers exclude it."""


def plausible_time(value: object) -> bool:
    """A unix time (seconds) a run could have written."""
    return isinstance(value, NUMBER) and value.__class__ is not bool and math.isfinite(value) and EARLIEST <= value < LATEST


def plausible_step(value: object) -> bool:
    """A step number: a whole number in [0, MAX_STEP] (JSON may write it as 3.0)."""
    if value.__class__ is bool or not isinstance(value, NUMBER):
        return False
    return math.isfinite(value) and 0 <= value <= MAX_STEP


def clamp_time(value: float) -> float:
    """A file's mtime brought into the plausible range (a junk mtime must not break dating)."""
    if not math.isfinite(value):
        return EARLIEST
    return min(max(value, EARLIEST), LATEST - 1)


def bounded_int(value: object, limit: int = 2**53) -> int:
    """`int(value)` for a config setting, refusing what no setting can be (ValueError)."""
    if isinstance(value, bool):
        raise ValueError("a boolean")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("not finite")
    number = int(value)  # type: ignore[call-overload]
    if abs(number) > limit:
        raise ValueError("out of range")
    return number
