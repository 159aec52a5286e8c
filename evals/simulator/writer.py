"""Writing a run: merge every process's events in time order and append them to their files.

Processes write concurrently, so their lines interleave by time (in `metrics.jsonl`, which two
processes append to, that is visible row by row). Steps are generated one at a time; all events
of step n happen after ship[n-1] (see `timeline.py`), so after step n everything up to ship[n]
is final and is flushed. The snapshot ends at a cut time; a later `append_run` regenerates the
same schedule and writes only what lies after the old cut, so write + append == one longer write.
Each file's mtime is set to the simulated time of its last line.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from . import env_log, inference_log, orchestrator_log, trainer_log
from .artifacts import config_artifacts, step_artifacts
from .events import Artifact, Event, Sim
from .layout import RunPaths
from .scenario import Scenario

# After a crash the launcher tears everything down within a few seconds.
DEATH_AFTER_CRASH_S = {"trainer": 1.5, "orchestrator": 2.0, "metrics": 2.0, "inference": 2.6}
ENV_DEATH_AFTER_CRASH_S = 2.4


class RunWriter:
    """Appends events to the run's files and remembers each file's newest simulated time."""

    def __init__(self, sim: Sim, root: Path) -> None:
        self.sim = sim
        self.paths = RunPaths(root, sim.layout)
        self.paths.prepare()
        self._files: dict[str, BinaryIO] = {}
        self._stream_paths: dict[str, Path] = {}
        self.newest: dict[Path, float] = {}
        self.bytes_written = 0

    def _file(self, stream: str) -> BinaryIO:
        handle = self._files.get(stream)
        if handle is None:
            path = self.paths.stream(stream)
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = self._files[stream] = open(path, "ab", buffering=1 << 20)  # noqa: SIM115
            self._stream_paths[stream] = path
        return handle

    def write(self, events: list[Event]) -> None:
        for e in events:
            data = e.text.encode() if isinstance(e.text, str) else e.text
            self._file(e.stream).write(data)
            self.bytes_written += len(data)
            path = self._stream_paths[e.stream]
            if e.t > self.newest.get(path, -math.inf):
                self.newest[path] = e.t

    def artifact(self, a: Artifact) -> None:
        path = self.paths.root / a.relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(a.data)
        self.bytes_written += len(a.data)
        self.newest[path] = a.t

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files.clear()
        for path, t in self.newest.items():
            epoch = self.sim.clock.epoch(t)
            os.utime(path, (epoch, epoch))


def _death_times(sim: Sim) -> dict[str, float]:
    if not sim.sc.crashes:
        return {}
    c = sim.tl.crash_time()
    deaths = {name: c + dt for name, dt in DEATH_AFTER_CRASH_S.items()}
    deaths |= {f"env:{env}": c + ENV_DEATH_AFTER_CRASH_S for env in sim.sc.envs}
    return deaths


def _first_step_after(sim: Sim, after: float) -> int:
    n = 1
    while sim.tl.last_event_time(n) <= after:
        n += 1
    return n


def stream_run(
    sim: Sim,
    writer: RunWriter,
    *,
    after: float,
    cut: float | None,
    stop_bytes: int | None = None,
) -> tuple[int, int, float]:
    """Write every event in (after, cut]. With `cut=None`, the cut is decided once `stop_bytes`
    have been written (the trainer step finishing then is the last). Returns
    (last trainer step, last orchestrator step, cut)."""
    sc, tl = sim.sc, sim.tl
    deaths = _death_times(sim)
    trainer_limit = sc.onset_step - 1 if sc.kind == "crash-oom" else sc.max_steps
    limit = math.inf if cut is None else cut
    pending: list[Event] = []

    def admit(events: list[Event]) -> None:
        for e in events:
            if after < e.t <= limit and e.t <= deaths.get(e.stream, math.inf):
                pending.append(e)

    def flush(upto: float) -> None:
        nonlocal pending
        ready = sorted((e for e in pending if e.t <= upto and e.t <= limit), key=lambda e: e.t)
        pending = [e for e in pending if e.t > upto and e.t <= limit]
        writer.write(ready)

    if after < 0:
        admit(trainer_log.startup(sim) + orchestrator_log.startup(sim) + inference_log.startup(sim) + env_log.startup(sim))
    n = _first_step_after(sim, after)
    last_orch = n - 1
    while n <= sc.max_steps:
        tl.ensure(n)
        if tl.ship[n - 1] > limit:
            break
        events = orchestrator_log.step(sim, n) + inference_log.step(sim, n) + env_log.step(sim, n)
        if n <= trainer_limit:
            events += trainer_log.step(sim, n)
        admit(events)
        if tl.ship[n] <= limit:
            last_orch = n
        flush(tl.ship[n])
        if cut is None and stop_bytes is not None and writer.bytes_written >= stop_bytes:
            cut = limit = tl.cut_time(n)
        n += 1
    if cut is None:
        cut = limit = tl.cut_time(min(n - 1, sc.max_steps))
    trainer_last = 0
    while trainer_last < trainer_limit:
        tl.ensure(trainer_last + 1)
        if tl.end[trainer_last + 1] > cut:
            break
        trainer_last += 1
    if sc.kind == "crash-oom" and tl.crash_time() <= cut:
        admit(trainer_log.crash(sim))
    elif sc.finished and trainer_last == sc.max_steps:
        end = tl.end[sc.max_steps]
        admit(trainer_log.finish(sim) + orchestrator_log.finish(sim) + inference_log.finish(sim, end + 7.0))
    flush(math.inf)
    return trainer_last, last_orch, cut


def _fresh_dir(out_dir: Path, overwrite: bool) -> Path:
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{out_dir} is not empty (pass overwrite=True to replace it)")
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir


def _write(scenario: Scenario, out_dir: Path, *, overwrite: bool, stop_bytes: int | None = None) -> tuple[Path, int]:
    root = _fresh_dir(out_dir, overwrite)
    sim = Sim(scenario)
    writer = RunWriter(sim, root)
    try:
        for a in config_artifacts(sim):
            writer.artifact(a)
        cut = None if stop_bytes is not None else sim.tl.cut_time()
        last_trainer, last_orch, cut = stream_run(sim, writer, after=-1.0, cut=cut, stop_bytes=stop_bytes)
        for a in step_artifacts(sim, (1, last_trainer), (1, last_orch), cut):
            writer.artifact(a)
    finally:
        writer.close()
    return root, last_trainer


def write_run(scenario: Scenario, out_dir: str | Path, *, overwrite: bool = False) -> Path:
    """Write the whole recorded run of `scenario` into `out_dir` (the run directory). Deterministic."""
    root, _ = _write(scenario, Path(out_dir), overwrite=overwrite)
    return root


def append_run(
    scenario: Scenario,
    run_dir: str | Path,
    *,
    steps: int | None = None,
    stop_bytes: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> Scenario:
    """Continue a run written by `write_run(scenario, run_dir)` to `steps` trainer steps (or by
    about `stop_bytes` bytes). Returns the scenario describing the longer run; the files are
    exactly what `write_run` of that scenario would have written (rollouts aside: older steps
    keep theirs)."""
    if scenario.crashes or scenario.finished:
        raise ValueError("a crashed or finished run cannot be continued")
    if (steps is None) == (stop_bytes is None):
        raise ValueError("give exactly one of steps or stop_bytes")
    if steps is not None and not scenario.steps < steps <= scenario.max_steps:
        raise ValueError(f"steps must be in ({scenario.steps}, {scenario.max_steps}]")
    if scenario.kind == "crash-oom":
        raise ValueError("continuing a run towards its crash is not supported; write it with more steps")
    sim = Sim(scenario)
    old_cut = sim.tl.cut_time()
    old_last_trainer, old_last_orch = scenario.last_trainer_step, _last_orch(sim, old_cut)
    writer = RunWriter(sim, Path(run_dir))
    try:
        cut = None if steps is None else sim.tl.cut_time(steps)
        last_trainer, last_orch, cut = stream_run(sim, writer, after=old_cut, cut=cut, stop_bytes=stop_bytes)
        for a in step_artifacts(sim, (old_last_trainer + 1, last_trainer), (old_last_orch + 1, last_orch), cut):
            writer.artifact(a)
    finally:
        writer.close()
    if on_progress is not None:
        on_progress(last_trainer)
    return scenario.model_copy(update={"steps": last_trainer})


def _last_orch(sim: Sim, cut: float) -> int:
    n = 0
    while True:
        sim.tl.ensure(n + 1)
        if sim.tl.ship[n + 1] > cut:
            return n
        n += 1
