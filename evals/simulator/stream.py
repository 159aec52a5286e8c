"""A run as one time-ordered stream of events, step by step: what the writer and live run consume.

Processes write concurrently, so their lines interleave by time. Steps are generated one at a
time; all events of step n happen after ship[n-1] (see `timeline.py`), so once step n is
generated everything up to ship[n] is final and is handed out as one sorted batch. The
recording ends at `window.cut`, which a consumer may lower while it reads (the 1 GB benchmark
stops after N bytes). `deaths` cuts each process's output where it died or fell silent.
With `artifacts=True` the checkpoints, broadcasts and rollouts come in the stream too, at the
moment their owner writes them (a live run; the offline writer adds them at the end).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from . import crashes, env_log, inference_log, launcher_log, orchestrator_log, trainer_log
from .artifacts import final_checkpoints, live_step_artifacts
from .events import Artifact, Event, Sim

Item = Event | Artifact


@dataclass
class Window:
    after: float
    """Only what happens after this time (-1: from the launch)."""
    cut: float = math.inf
    """The recording ends here (inf: decided at the end, by the scenario's steps)."""
    step: int = 0
    """The orchestrator step generated last (for a consumer that lowers `cut`)."""
    last_trainer: int = 0
    last_orch: int = 0


def first_step_after(sim: Sim, after: float) -> int:
    n = sim.sc.first_step
    while sim.tl.last_event_time(n) <= after:
        n += 1
    return n


def startup_events(sim: Sim) -> list[Event]:
    return (
        launcher_log.startup(sim)
        + trainer_log.startup(sim)
        + orchestrator_log.startup(sim)
        + inference_log.startup(sim)
        + env_log.startup(sim)
        + crashes.outage_events(sim)
    )


def step_events(sim: Sim, n: int) -> list[Event]:
    return orchestrator_log.step(sim, n) + inference_log.step(sim, n) + env_log.step(sim, n) + trainer_log.step(sim, n)


def items(sim: Sim, window: Window, *, artifacts: bool = False, owner: str | None = None) -> Iterator[list[Item]]:
    """Batches of events (and with `artifacts`, files) in time order; `owner` limits the
    artifacts to one process's."""
    sc, tl = sim.sc, sim.tl
    deaths = crashes.deaths(sim)
    pending: list[Item] = []

    def admit(new: list[Item]) -> None:
        for e in new:
            if window.after < e.t <= window.cut and e.t <= deaths.get(_proc(e), math.inf):
                pending.append(e)
                if sc.slurm and isinstance(e, Event) and e.stream == "orchestrator":
                    pending.extend(launcher_log.tail([e]))

    def take(upto: float) -> list[Item]:
        nonlocal pending
        ready = sorted((e for e in pending if e.t <= upto and e.t <= window.cut), key=lambda e: e.t)
        pending = [e for e in pending if e.t > upto and e.t <= window.cut]
        return ready

    if window.after < 0:
        admit(list(startup_events(sim)))
    n = first_step_after(sim, window.after)
    window.last_orch = n - 1
    while n <= sc.max_steps:
        tl.ensure(n)
        if tl.ship[n - 1] > window.cut:
            break
        new: list[Item] = list(step_events(sim, n))
        if artifacts:
            new += live_step_artifacts(sim, n, owner)
        admit(new)
        if tl.ship[n] <= window.cut:
            window.last_orch = n
        window.step = n
        yield take(tl.ship[n])
        n += 1
    if window.cut == math.inf:
        window.cut = tl.cut_time(min(n - 1, sc.max_steps))
    trainer_end = min(window.cut, deaths.get("trainer", math.inf))
    last = sc.first_step - 1
    while last < sc.max_steps:
        tl.ensure(last + 1)
        if tl.end[last + 1] > trainer_end:
            break
        last += 1
    window.last_trainer = last
    p = crashes.plan(sim)
    if p is not None and p.time <= window.cut:
        admit(list(crashes.crash_events(sim)))
    elif sc.finished and last == sc.max_steps:
        admit(finish_events(sim))
        if artifacts:
            admit(list(final_checkpoints(sim)))
    yield take(math.inf)


def finish_events(sim: Sim) -> list[Item]:
    end = sim.tl.end[sim.sc.max_steps]
    return [
        *trainer_log.finish(sim),
        *orchestrator_log.finish(sim),
        *inference_log.finish(sim, end + 7.0),
        *launcher_log.finished(sim, end + 8.0),
    ]


def _proc(item: Item) -> str:
    return item.proc if isinstance(item, Event) else item.owner
