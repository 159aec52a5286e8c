"""A SIMULATED verl, TRL or OpenRLHF run in real time, from real processes: for tests and demos only.

This process becomes the launch command (verl: `python3 -m verl.trainer.main_ppo <overrides>`; TRL:
`/opt/conda/bin/python3.11 /opt/conda/bin/accelerate launch ...`; OpenRLHF:
`python3 -m openrlhf.cli.train_ppo_ray ...`, retitled with setproctitle) and forks one child per process
of the framework, titled as the framework's are: Ray actors `ray::TaskRunner.run`, `ray::WorkerDict`
(verl), `ray::PPOTrainer.fit`, `ray::PolicyModelActor`, `ray::ReferenceModelActor`, `ray::RolloutRayActor`
(OpenRLHF); torch elastic's rank workers `python3.11 -u train_grpo.py ...` (TRL). Every process computes
the same plan as the offline writer and writes its own share when the simulated clock reaches it (`speed`
simulated seconds per real second; log times are real times): the driver the console (Ray forwards
actor output to it), the TaskRunner verl's JSONL, dumps and tracker, each worker or rank its checkpoint
shards, TRL's rank 0 the training output, each failing rank its traceback. All run in the launch
directory and keep their log files open (a monitor ties them to the run by cwd and open files), and the
logs name their real pids (Ray's `(TaskRunner pid=N)`, torch elastic's `(pid: N)`): the children are forked
first, then every process computes the plan with the pid map the parent sends through a pipe.

A crash: the failing process dies when the plan says (`-9` by SIGKILL, `-6` by SIGABRT, or exit 1), the
launch command prints the framework's crash output, stops the others and exits 1. A run that reaches
max_steps exits 0. SIGTERM / Ctrl-C stop everything (exit 1). Children exit when the parent is gone.
Unlike a real Ray cluster, the Ray actors are children of the driver here (no raylet, no gcs_server).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import shutil
import signal
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

import setproctitle

from .common import Item, Plan
from .scenario import FrameworkScenario
from .writer import plan_for

POLL_S = 0.1
GRACE_S = 3.0


class Files:
    """One process's open files (append mode, kept open for its life)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.handles: dict[str, BinaryIO] = {}

    def write(self, item: Item) -> None:
        path = self.root / item.path
        if item.op == "remove":
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if item.op == "put":
            tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
            tmp.write_bytes(item.data)
            tmp.replace(path)
            return
        handle = self.handles.get(item.path)
        if handle is None:
            handle = self.handles[item.path] = open(path, "ab")  # noqa: SIM115 - held for the process's life
        handle.write(item.data)
        handle.flush()


def _sleep_until(wall: float, parent: int | None) -> bool:
    """Sleep until wall-clock `wall`; False when the parent process is gone."""
    while True:
        if parent is not None and os.getppid() != parent:
            return False
        left = wall - time.time()
        if left <= 0:
            return True
        time.sleep(min(left, 0.2))


def _child(role: str, title: str, rfd: int, sc: FrameworkScenario, root: Path, wall0: float, speed: float, parent: int) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    setproctitle.setproctitle(title)
    with os.fdopen(rfd, "rb") as pipe:  # the real pids of every process, so the logs name them
        data = pipe.readline()
    if not data:
        return 0  # the parent died before starting the run
    plan = plan_for(sc.model_copy(update={"pids": json.loads(data)}), rate=speed)
    files = Files(root)
    dies = plan.failing == role
    stop = plan.fail_time if dies else math.inf
    for item in plan.ordered():
        if item.owner != role or item.t > stop:
            continue
        if not _sleep_until(wall0 + item.t / speed, parent):
            return 0
        files.write(item)
    if dies:
        if not _sleep_until(wall0 + plan.fail_time / speed, parent):
            return 0
        if plan.failing_code < 0:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGABRT: no core file in the run directory
            signal.signal(-plan.failing_code, signal.SIG_DFL)
            os.kill(os.getpid(), -plan.failing_code)
            time.sleep(5)
        return plan.failing_code
    while os.getppid() == parent:  # alive until the launch command is gone
        time.sleep(0.2)
    return 0


def _fork(
    role: str, title: str, sc: FrameworkScenario, root: Path, wall0: float, speed: float, others: list[int]
) -> tuple[int, int]:
    """(child pid, write end of the pipe that will carry the pid map). `others`: the write ends of the
    children forked before, which this child must not hold (their readers wait for the map)."""
    parent = os.getpid()
    rfd, wfd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        os.close(rfd)
        return pid, wfd
    os.close(wfd)
    for fd in others:
        os.close(fd)
    code = 1
    try:
        code = _child(role, title, rfd, sc, root, wall0, speed, parent)
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code & 0xFF if code >= 0 else 1)
    return 0, 0  # unreachable


class _Stop(Exception):
    pass


def run_live(sc: FrameworkScenario, run_dir: Path, *, speed: float) -> int:
    """Be the launch command of a live simulated run until it finishes, crashes or is stopped."""
    root = Path(run_dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    wall0 = time.time()
    sc = sc.model_copy(update={"start": datetime.fromtimestamp(wall0, UTC)})
    draft = plan_for(sc, rate=speed)  # the roles and titles (they do not depend on the pids)
    parent_role = draft.parent
    os.chdir(root)
    setproctitle.setproctitle(draft.roles[parent_role])
    children: dict[str, int] = {}

    def on_term(signum: int, frame: object) -> None:
        raise _Stop

    signal.signal(signal.SIGTERM, on_term)
    files = Files(root)
    code = 1
    try:
        pipes: dict[str, int] = {}
        for role, title in draft.roles.items():
            if role != parent_role:
                children[role], pipes[role] = _fork(role, title, sc, root, wall0, speed, list(pipes.values()))
        pids = {**children, parent_role: os.getpid()}
        sc = sc.model_copy(update={"pids": pids})
        plan = plan_for(sc, rate=speed)
        for wfd in pipes.values():
            with os.fdopen(wfd, "wb") as pipe:
                pipe.write(json.dumps(pids).encode() + b"\n")
        for item in plan.ordered():
            if item.owner != parent_role:
                continue
            if plan.failing and item.t >= plan.fail_time:
                _wait_for(children, plan.failing, wall0 + (plan.fail_time + 1.0) / speed)
            _reap(children, plan)
            _sleep_until(wall0 + item.t / speed, None)
            files.write(item)
        if plan.exit_code is None:  # a live run goes on until stopped (the CLI makes live runs finish)
            while True:
                time.sleep(POLL_S)
        _sleep_until(wall0 + plan.end / speed, None)
        code = plan.exit_code
    except (KeyboardInterrupt, _Stop):
        code = 1
    except _Unplanned:
        code = 1
    finally:
        _stop(children)
    return code


class _Unplanned(Exception):
    """A child died that the plan did not kill: the framework would fail too."""


def _reap(children: dict[str, int], plan: Plan) -> None:
    for role, pid in list(children.items()):
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            del children[role]
            if role != plan.failing:
                raise _Unplanned(f"{role} exited with {os.waitstatus_to_exitcode(status)}")


def _wait_for(children: dict[str, int], role: str, deadline: float) -> None:
    pid = children.get(role)
    while pid is not None and time.time() < deadline:
        got, _ = os.waitpid(pid, os.WNOHANG)
        if got:
            del children[role]
            return
        time.sleep(0.05)


def _stop(children: dict[str, int]) -> None:
    for pid in children.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.time() + GRACE_S
    while children and time.time() < deadline:
        for role, pid in list(children.items()):
            got, _ = os.waitpid(pid, os.WNOHANG)
            if got:
                del children[role]
        time.sleep(0.05)
    for pid in children.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    children.clear()
