"""A simulated prime-rl run in real time, from real processes: for tests and demos, nothing more.

This process becomes `PRIME-RL::Launcher` and forks one child per prime-rl process
(`PRIME-RL::Trainer`, `::Orchestrator`, `::Inference`, one `::EnvServer` per env). Each child
computes the same event stream as the offline writer (`stream.py`) and appends its own share
(its logs, its metrics.jsonl rows, its checkpoints, broadcasts and rollouts) when the simulated
clock reaches it; `speed` simulated seconds pass per real second, and every timestamp on disk
is the real time it was written at. Each child keeps its log files open for its whole life:
setproctitle clears /proc/PID/environ, so open files are how a monitor ties it to the run.

The launcher behaves like `uv run rl`: it prints its start-up lines and then tails
orchestrator.log; when a child fails it prints `Error: <Name> failed with exit code N` and
`Terminating all processes...`, stops the others and exits 1; Ctrl-C (SIGINT) and SIGTERM stop
everything with prime-rl's `Received ...` line and exit status 1; a run that reaches max_steps
prints `Training finished!` and exits 0. Children ignore SIGINT (the launcher stops them) and
exit when the launcher is gone, so nothing is left behind.

Each child needs some CPU per simulated step (the orchestrator ~60 ms, building its rollouts):
keep `step_time_s / speed` above ~0.1 s, or the orchestrator lags behind its own clock.
"""

from __future__ import annotations

import contextlib
import faulthandler
import math
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

import setproctitle

from . import crashes, launch, launcher_log
from .artifacts import clean_future_steps, config_artifacts
from .events import Artifact, Event, Sim
from .layout import RunPaths
from .scenario import Scenario
from .stream import Window, items

POLL_S = 0.2
"""How often the launcher checks its children (prime-rl: 1 s)."""
TERMINATE_GRACE_S = 5.0
LIVE_HANG_S = 86400.0
"""A live hang lasts until someone stops it (a day of simulated time is the horizon)."""
TITLES = {"trainer": "Trainer", "orchestrator": "Orchestrator", "inference": "Inference"}


def title_of(role: str) -> str:
    return "EnvServer" if role.startswith("env:") else TITLES[role]


def launcher_name(role: str) -> str:
    """How prime-rl's launcher names a failed child (`process_name.capitalize()`)."""
    return f"Train env server {role[4:]}" if role.startswith("env:") else TITLES[role]


def live_cut(sim: Sim) -> float:
    sc, tl = sim.sc, sim.tl
    if sc.hangs:
        return tl.hang_start() + LIVE_HANG_S
    return tl.cut_time()


# ---- a child: one prime-rl process ---------------------------------------------------------------


class ChildWriter:
    """Appends one process's lines to its files, opened at start and kept open."""

    def __init__(self, paths: RunPaths, streams: list[str]) -> None:
        self.paths = paths
        self.files: dict[str, BinaryIO] = {}
        for name in streams:
            path = paths.stream(name)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                self.files[name] = open(path, "ab")  # noqa: SIM115 - held for the process's life

    def write(self, item: Event | Artifact) -> None:
        if isinstance(item, Artifact):
            path = self.paths.root / item.relpath
            if item.remove:
                shutil.rmtree(path, ignore_errors=True)
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(item.data)
            tmp.replace(path)
            return
        handle = self.files.get(item.stream)
        if handle is not None:
            handle.write(item.text.encode() if isinstance(item.text, str) else item.text)

    def flush(self) -> None:
        for handle in self.files.values():
            handle.flush()


def _streams(role: str, layout: str) -> list[str]:
    if role in ("trainer", "orchestrator"):
        return [role, "metrics"] if layout == "H" else [role]
    return [role]


def child_main(role: str, scenario: Scenario, run_dir: Path, wall0: float, speed: float, launcher_pid: int) -> int:
    """Run one process of the simulated run; returns its exit code (or kills itself, -9)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stopped_at: list[float] = []
    """Simulated time at which SIGTERM came. What was due before it still goes to disk: a child starved
    of CPU (a loaded machine) lags behind the simulated clock, and without this a crash elsewhere would
    cut off files (a checkpoint's `.metadata`, `progress.pt`) that the simulated world wrote long before."""

    def on_sigterm(signum: int, frame: object) -> None:
        if not stopped_at:
            stopped_at.append((time.time() - wall0) * speed)

    signal.signal(signal.SIGTERM, on_sigterm)
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 PID` shows where a child is
    setproctitle.setproctitle(f"PRIME-RL::{title_of(role)}")
    sim = Sim(scenario, rate=speed)
    sim.horizon = live_cut(sim)
    writer = ChildWriter(RunPaths(run_dir, scenario.layout, scenario.attempt), _streams(role, scenario.layout))
    plan = crashes.plan(sim)
    mine = plan is not None and plan.proc == role
    stop_at = plan.exit_time if mine else math.inf

    def wait_until(t: float) -> bool:
        """Sleep until simulated time t; False when the launcher is gone."""
        while True:
            if stopped_at:
                return t <= stopped_at[0]
            if os.getppid() != launcher_pid:
                return False
            left = wall0 + t / speed - time.time()
            if left <= 0:
                return True
            time.sleep(min(left, 0.25))

    for batch in items(sim, Window(-1.0, sim.horizon), artifacts=True, owner=role):
        for item in batch:
            owner = item.proc if isinstance(item, Event) else item.owner
            if owner != role or item.t > stop_at:
                continue
            if not wait_until(item.t):
                return _end(stopped_at)
            writer.write(item)
            writer.flush()
    if mine:
        assert plan is not None
        if not wait_until(plan.exit_time):
            return _end(stopped_at)
        if plan.exit_code == -9:
            os.kill(os.getpid(), signal.SIGKILL)  # the kernel's OOM killer: no goodbye
        return plan.exit_code
    if role in ("trainer", "orchestrator") and scenario.finished and not scenario.ends_early:
        return 0
    while os.getppid() == launcher_pid and not stopped_at:  # alive (serving, hung, waiting) until stopped
        time.sleep(0.25)
    return _end(stopped_at)


def _end(stopped_at: list[float]) -> int:
    """Exit as SIGTERM leaves a process (status -15) once the backlog is written; 0 when the launcher
    is simply gone."""
    if stopped_at:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    return 0


def _fork(role: str, scenario: Scenario, run_dir: Path, wall0: float, speed: float) -> int:
    launcher = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        code = child_main(role, scenario, run_dir, wall0, speed, launcher)
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)
    return 0  # unreachable


# ---- the launcher ---------------------------------------------------------------------------------


class Tail(threading.Thread):
    """`tail -F orchestrator.log` onto the launcher's stdout, as prime-rl's launcher does."""

    def __init__(self, path: Path, out: BinaryIO) -> None:
        super().__init__(daemon=True)
        self.path, self.out = path, out
        self.stopped = threading.Event()

    def run(self) -> None:
        offset = 0
        while not self.stopped.is_set():
            self.pump(offset)
            offset = self.offset
            self.stopped.wait(0.1)
        self.pump(offset)

    def pump(self, offset: int) -> None:
        self.offset = offset
        try:
            with open(self.path, "rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            return
        cut = data.rfind(b"\n") + 1
        if cut:
            self.out.write(data[:cut])
            self.out.flush()
            self.offset = offset + cut


class Launcher:
    def __init__(self, scenario: Scenario, run_dir: Path, speed: float) -> None:
        self.wall0 = time.time()
        start = datetime.fromtimestamp(self.wall0, UTC)
        self.sc = scenario.model_copy(update={"start": start})
        self.run_dir = run_dir
        self.speed = speed
        self.sim = Sim(self.sc, rate=speed)
        self.sim.horizon = live_cut(self.sim)
        self.children: dict[str, int] = {}
        self.out: BinaryIO = sys.stdout.buffer
        self.tail: Tail | None = None

    def now(self) -> float:
        return (time.time() - self.wall0) * self.speed

    def say(self, events: list[Event]) -> None:
        for e in events:
            self.out.write(e.text.encode() if isinstance(e.text, str) else e.text)
        self.out.flush()

    def prepare(self) -> None:
        sc, root = self.sc, self.run_dir
        if sc.resume_step is None:
            if root.exists():
                shutil.rmtree(root)
            root.mkdir(parents=True)
            launch.save_params(root, sc)
        else:
            clean_future_steps(root, sc.layout, sc.resume_step)
            if sc.layout == "L":
                launch.truncate_l_logs(root)
        paths = RunPaths(root, sc.layout, sc.attempt)
        paths.prepare()
        for a in config_artifacts(self.sim):
            path = root / a.relpath
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(a.data)

    def start(self) -> None:
        self.say([e for e in launcher_log.startup(self.sim) if "Startup complete" not in str(e.text)])
        roles = ["inference", *(f"env:{env}" for env in self.sc.envs), "orchestrator", "trainer"]
        for role in roles:
            self.children[role] = _fork(role, self.sc, self.run_dir, self.wall0, self.speed)
        done = [e for e in launcher_log.startup(self.sim) if "Startup complete" in str(e.text)]
        self.say(done)
        orch_log = RunPaths(self.run_dir, self.sc.layout, self.sc.attempt).stream("orchestrator")
        assert orch_log is not None
        self.tail = Tail(orch_log, self.out)
        self.tail.start()

    def reap(self) -> dict[str, int]:
        """Children that exited since the last call -> exit code (negative: signal)."""
        exited = {}
        for role, pid in list(self.children.items()):
            got, status = os.waitpid(pid, os.WNOHANG)
            if got:
                exited[role] = os.waitstatus_to_exitcode(status)
                del self.children[role]
        return exited

    def stop_children(self) -> None:
        for pid in self.children.values():
            _signal(pid, signal.SIGTERM)
        deadline = time.time() + TERMINATE_GRACE_S
        while self.children and time.time() < deadline:
            self.reap()
            time.sleep(0.05)
        for pid in self.children.values():
            _signal(pid, signal.SIGKILL)
        for pid in self.children.values():
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        self.children.clear()
        if self.tail is not None:
            self.tail.stopped.set()
            self.tail.join(timeout=2)

    def watch(self) -> int:
        finished: set[str] = set()
        while True:
            for role, code in self.reap().items():
                if code != 0:
                    self.stop_tail()
                    self.say(launcher_log.failed(self.sim, launcher_name(role), code, self.now()))
                    self.stop_children()
                    return 1
                finished.add(role)
            if {"trainer", "orchestrator"} <= finished:
                end = self.sim.tl.end[self.sc.max_steps] + 8.0
                time.sleep(max(0.0, self.wall0 + end / self.speed - time.time()))
                self.stop_tail()
                self.say(launcher_log.finished(self.sim, self.now()))
                self.stop_children()
                return 0
            time.sleep(POLL_S)

    def stop_tail(self) -> None:
        if self.tail is not None:
            self.tail.stopped.set()
            self.tail.join(timeout=2)
            self.tail = None


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


class _Terminated(Exception):
    pass


def run_live(scenario: Scenario, run_dir: Path, *, speed: float, overwrite: bool = False) -> int:
    """Be the launcher of a live simulated run until it finishes, fails or is stopped."""
    del overwrite  # the caller checked the directory; a fresh launch replaces it
    setproctitle.setproctitle("PRIME-RL::Launcher")
    launcher = Launcher(scenario, Path(run_dir), speed)

    def on_sigterm(signum: int, frame: object) -> None:
        raise _Terminated

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        launcher.prepare()
        launcher.start()
        return launcher.watch()
    except (KeyboardInterrupt, _Terminated) as exc:
        launcher.stop_tail()
        launcher.say(launcher_log.interrupted(launcher.sim, launcher.now(), sigterm=isinstance(exc, _Terminated)))
        launcher.stop_children()
        return 1
    finally:
        if launcher.children:
            launcher.stop_children()
