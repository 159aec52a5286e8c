"""Writing a recorded run: the time-ordered event stream (`stream.py`) appended to its files.

Processes write concurrently, so their lines interleave by time (in `metrics.jsonl`, which two
processes append to, that is visible row by row). The snapshot ends at a cut time; a later
`append_run` regenerates the same schedule and writes only what lies after the old cut, so
write + append == one longer write. `resume_run` adds the next attempt of a run from one of its
checkpoints, as a relaunch with prime-rl's resume flags does. Each file's mtime is set to the
simulated time of its last line.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from .artifacts import clean_future_steps, config_artifacts, step_artifacts
from .events import Artifact, Event, Sim
from .expectations import EXPECTATIONS
from .launcher_log import job_id
from .layout import RunPaths
from .scenario import Scenario
from .stream import Window, items


class RunWriter:
    """Appends events to the run's files and remembers each file's newest simulated time."""

    def __init__(self, sim: Sim, root: Path) -> None:
        self.sim = sim
        job = f"job_{job_id(sim)}.log" if sim.sc.slurm else None
        self.paths = RunPaths(root, sim.layout, sim.sc.attempt, job_log=job)
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

    def write(self, events: list[Event | Artifact]) -> None:
        for e in events:
            if isinstance(e, Artifact):
                self.artifact(e)
                continue
            if self.paths.stream(e.stream) is None:
                continue  # the launcher's terminal: not on disk in a local run
            data = e.text.encode() if isinstance(e.text, str) else e.text
            self._file(e.stream).write(data)
            self.bytes_written += len(data)
            path = self._stream_paths[e.stream]
            if e.t > self.newest.get(path, -math.inf):
                self.newest[path] = e.t

    def artifact(self, a: Artifact) -> None:
        path = self.paths.root / a.relpath
        if a.remove:
            shutil.rmtree(path, ignore_errors=True)
            return
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
    window = Window(after, math.inf if cut is None else cut)
    if cut is not None:
        sim.horizon = cut
    for batch in items(sim, window):
        writer.write(batch)
        if cut is None and stop_bytes is not None and window.cut == math.inf and writer.bytes_written >= stop_bytes:
            window.cut = sim.tl.cut_time(window.step)
    return window.last_trainer, window.last_orch, window.cut


def _fresh_dir(out_dir: Path, overwrite: bool) -> Path:
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{out_dir} is not empty (pass overwrite=True to replace it)")
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir


def _write(scenario: Scenario, out_dir: Path, *, overwrite: bool, stop_bytes: int | None = None) -> tuple[Path, int]:
    root = _fresh_dir(out_dir, overwrite) if scenario.resume_step is None else Path(out_dir)
    sim = Sim(scenario)
    writer = RunWriter(sim, root)
    try:
        for a in config_artifacts(sim):
            writer.artifact(a)
        cut = None if stop_bytes is not None else sim.tl.cut_time()
        last_trainer, last_orch, cut = stream_run(sim, writer, after=-1.0, cut=cut, stop_bytes=stop_bytes)
        first = scenario.first_step
        for a in step_artifacts(sim, (first, last_trainer), (first, last_orch), cut):
            writer.artifact(a)
    finally:
        writer.close()
    return root, last_trainer


def resume_run(scenario: Scenario, run_dir: str | Path, *, gap_s: float = 240.0) -> Path:
    """Add the next attempt of a run in `run_dir`: `scenario` has `resume_step` (a complete
    checkpoint of the run) and `attempt`; it starts `gap_s` after the run's newest file and
    trains to `scenario.steps`. Rollouts and broadcasts past the resume step are removed first,
    as prime-rl does."""
    root = Path(run_dir)
    if scenario.resume_step is None:
        raise ValueError("resume_run needs a scenario with resume_step")
    newest = max((p.stat().st_mtime for p in root.rglob("*") if p.is_file() and not p.is_symlink()), default=None)
    if newest is None:
        raise ValueError(f"{root} holds no run to resume")
    start = datetime.fromtimestamp(round(newest + gap_s), UTC)
    clean_future_steps(root, scenario.layout, scenario.resume_step)
    _write(scenario.model_copy(update={"start": start}), root, overwrite=False)
    return root


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
    if scenario.ends_early or scenario.finished:
        raise ValueError("a crashed, hung or finished run cannot be continued")
    if (steps is None) == (stop_bytes is None):
        raise ValueError("give exactly one of steps or stop_bytes")
    if steps is not None and not scenario.steps < steps <= scenario.max_steps:
        raise ValueError(f"steps must be in ({scenario.steps}, {scenario.max_steps}]")
    if EXPECTATIONS[scenario.kind].ends_run and scenario.attempt == 1:
        raise ValueError("continuing a run towards its crash is not supported; write it with more steps")
    sim = Sim(scenario)
    old_cut = sim.tl.cut_time()
    old_last_trainer, old_last_orch = scenario.last_trainer_step, _last_orch(sim, old_cut)
    sim.horizon = math.inf
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
