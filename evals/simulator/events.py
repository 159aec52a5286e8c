"""What the process writers produce, and the shared context they read.

An `Event` is text appended to one log *stream* at a simulated time; an `Artifact` is a whole
file (checkpoint, rollouts, config) that appears at a time. `Sim` bundles the scenario with its
clock, numbers and schedule, built once, and formats loguru lines for any stream (the trainer's
get torchrun's `[trainer0]:` prefix).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from .clock import Clock
from .dynamics import Dynamics
from .logfmt import Level, loguru_line, prefix_lines
from .rng import stream
from .scenario import Scenario
from .timeline import Timeline


@dataclass(frozen=True, slots=True)
class Event:
    t: float
    stream: str
    text: str | bytes
    owner: str = ""
    """The process that writes it, when not the stream's own (both trainer and orchestrator
    append to `metrics`); `proc` is what a live run and a crash's teardown go by."""

    @property
    def proc(self) -> str:
        return self.owner or self.stream


@dataclass(frozen=True, slots=True)
class Artifact:
    t: float
    relpath: str
    data: bytes
    owner: str = "launcher"
    """The process that writes the file (a live run writes each file from its owner)."""
    remove: bool = False
    """Delete `relpath` (a directory) instead: prime-rl cleans old broadcasts."""


class Sim:
    """A scenario with everything derived from it; the only argument the writers take."""

    def __init__(self, scenario: Scenario, *, rate: float = 1.0, horizon: float = math.inf) -> None:
        """`rate`: simulated seconds per wall-clock second of the timestamps (a live run at
        `--speed 60` stamps its lines in real time while its steps report simulated seconds).
        `horizon`: nothing after this simulated time is generated (bounds hung steps)."""
        self.sc = scenario
        self.layout = scenario.layout
        self.clock = Clock(scenario.start, scenario.log_tz, rate)
        self.horizon = horizon
        self.dyn = Dynamics(scenario)
        self.tl = Timeline(scenario, self.dyn)
        r = stream(scenario.seed, "pids")
        base = 30000 + r.randrange(20000)
        self.pid = {"launcher": base, "inference": base + 37, "orchestrator": base + 52, "torchrun": base + 55}
        self.pid["trainer"] = base + 81
        self.host = f"gpu-node-{r.randrange(1, 33):02d}"

    @property
    def h(self) -> bool:
        return self.layout == "H"

    def log(self, t: float, stream_name: str, level: Level, message: str, exception: str = "") -> Event:
        text = loguru_line(self.clock.hms(t), level, message, exception)
        if stream_name == "trainer":
            text = prefix_lines(text)
        return Event(t, stream_name, text)

    @cached_property
    def run_dir(self) -> str:
        return self.sc.sim_run_dir
