"""Simulated time: seconds since the run started -> the wall-clock strings each log uses.

Everything in the simulator is scheduled in float seconds from `scenario.start`; only the
writers turn that into text. Logs carry local time without a date (loguru `HH:mm:ss`, vLLM
`MM-DD HH:MM:SS`), so a run that crosses midnight wraps, exactly as a real one does.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo


@lru_cache(maxsize=16)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


class Clock:
    """Maps run-relative seconds to epoch seconds and local time strings."""

    def __init__(self, start: datetime, tz: str = "UTC", rate: float = 1.0) -> None:
        self.start = start
        self.tz = _zone(tz)
        self.epoch0 = start.timestamp()
        self.rate = rate
        """Simulated seconds per real second (1 offline; `--speed` in a live run)."""

    def epoch(self, t: float) -> float:
        return self.epoch0 + t / self.rate

    def local(self, t: float) -> datetime:
        return (self.start + timedelta(seconds=t / self.rate)).astimezone(self.tz)

    def hms(self, t: float) -> str:
        """loguru `{time:HH:mm:ss}`."""
        return self.local(t).strftime("%H:%M:%S")

    def vllm(self, t: float) -> str:
        """vLLM's logging `%m-%d %H:%M:%S`."""
        return self.local(t).strftime("%m-%d %H:%M:%S")

    def glog(self, t: float, letter: str, pid: int, where: str) -> str:
        """torch.distributed's glog-style prefix, e.g. `E0824 14:09:44.123000 40213 file.py:874] `."""
        local = self.local(t)
        return f"{letter}{local:%m%d %H:%M:%S}.{local.microsecond:06d} {pid} {where}] "

    def stamp(self, t: float) -> str:
        """torchrun's `time` field in the ChildFailedError block."""
        return self.local(t).strftime("%Y-%m-%d_%H:%M:%S")
