"""Time as rlagent sees it: the wall clock, a monotonic clock and sleeping, behind one small interface.

Everything that waits or stamps a time (the launcher's verification, the cadence loop, the
collector's "now", a decision's time) takes a `Clock`, so tests pass one whose time moves only
when it sleeps (tests/fakes.py) and replays fix "now".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from rlagent.tools import interrupts


def utc_now() -> datetime:
    return datetime.now(UTC)


class Clock(Protocol):
    def now(self) -> datetime:
        """The wall clock, timezone-aware (UTC)."""
        ...

    def monotonic(self) -> float:
        """Seconds of a clock that never goes back, for measuring waits."""
        ...

    def sleep(self, seconds: float) -> None: ...


@dataclass(frozen=True)
class SystemClock:
    """The machine's clocks; `wall` may be fixed (a test or a replay at a known time) while
    waiting stays real."""

    wall: Callable[[], datetime] = utc_now

    def now(self) -> datetime:
        return self.wall()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        interrupts.sleep(seconds)
