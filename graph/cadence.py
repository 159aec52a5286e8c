"""The cadence loop of `rlagent run`: a round at once, then one per interval, on a fixed schedule.

Rounds start at `start + n * interval` (a slow round does not push the schedule back; when its
time has already passed the next one starts at once). Time and sleeping go through a `Clock`, so
the schedule is tested without waiting. What a round does (a check-in, printing, asking) is the
caller's; Ctrl-C (KeyboardInterrupt) goes through to it.
"""

from __future__ import annotations

from collections.abc import Callable

from rlagent.tools.clock import Clock


def at_cadence(round_: Callable[[], None], interval_s: float, clock: Clock, max_rounds: int | None = None) -> int:
    """Run `round_` now and then every `interval_s` seconds until `max_rounds` (None: forever);
    returns how many rounds ran."""
    done = 0
    started = clock.monotonic()
    while True:
        round_()
        done += 1
        if max_rounds is not None and done >= max_rounds:
            return done
        clock.sleep(max(0.0, started + done * interval_s - clock.monotonic()))
