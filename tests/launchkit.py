"""Test kit for the gate: a private tmux server (`tmux -L <unique>`, never the user's), a simulated
prime-rl run launched in its `Launcher` window (tests/fakeprime.py: real `PRIME-RL::*`
processes, logs, checkpoints, a crash, resume into a new attempt), and crashed run dirs on disk.

Every wait is bounded; teardown kills the private servers and asserts no process of the runs is
left.
"""

from __future__ import annotations

import shlex
import time
import uuid
from pathlib import Path

import libtmux
import pytest

from rlagent.models.actions import TmuxTarget
from rlagent.tools.processes import find_run_processes
from rlagent.tools.tmux import open_launcher, socket_file

from fakeprime import write_rl_script
from runbuilder import HRun

TOML = """max_steps = {max_steps}
[demo]
step_seconds = {step_seconds}
crash_at_step = {crash_at}
ckpt_interval = {ckpt_interval}
"""


def wait_for(predicate, timeout: float, what: str, every: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


class PrivateTmux:
    """A tmux server of its own with session `prime-rl` and an idle `Launcher` window."""

    def __init__(self, session: str = "prime-rl", window: str = "Launcher") -> None:
        self.socket = f"rlagent-test-{uuid.uuid4().hex[:10]}"
        self.server = libtmux.Server(socket_name=self.socket)
        self.server.new_session(
            session_name=session, window_name=window, detach=True, x=250, y=50, window_command="bash --norc --noprofile"
        )
        self.target = TmuxTarget(socket=self.socket, session=session, window=window)
        wait_for(lambda: self.pane().busy_with() is None, 10, "the Launcher shell")

    def pane(self):
        return open_launcher(self.target)

    def type(self, line: str) -> None:
        self.pane().send_line(line)

    def text(self) -> str:
        return "\n".join(self.pane().lines())

    def idle(self) -> bool:
        return self.pane().busy_with() is None

    def kill(self) -> None:
        if self.server.is_alive():
            self.server.kill()
        socket_file(self.socket).unlink(missing_ok=True)


class SimRun:
    """A simulated prime-rl run (layout H) to be launched in a PrivateTmux Launcher pane."""

    def __init__(self, root: Path, *, crash_at: int = 10, max_steps: int = 40, step_seconds: float = 0.15, ckpt: int = 3):
        self.root = root
        self.rl = write_rl_script(root / "bin")
        self.toml = root / "demo.toml"
        self.toml.write_text(TOML.format(max_steps=max_steps, step_seconds=step_seconds, crash_at=crash_at, ckpt_interval=ckpt))
        self.output_dir = root / "outputs"
        self.name = f"sim-{uuid.uuid4().hex[:8]}"  # unique: processes are tied to runs by name too
        self.dir = self.output_dir / self.name
        self.launch_argv = [str(self.rl), "@", str(self.toml), "--output-dir", str(self.output_dir), "--run.name", self.name]
        self.max_steps = max_steps

    @property
    def launch_line(self) -> str:
        return shlex.join(self.launch_argv)

    def resume_argv(self, step: int) -> list[str]:
        """The restart command as the reference says it should be, written out independently."""
        return [*self.launch_argv, "--resume.step", str(step)]

    def roles(self) -> list[str]:
        if not self.dir.exists():
            return []
        return sorted(p.role for p in find_run_processes(self.dir, self.name)[0])

    def status(self) -> str:
        path = self.dir / "STATUS.md"
        return path.read_text() if path.exists() else ""


@pytest.fixture
def tmux_servers():
    """Private tmux servers; all killed at teardown, and no simulated prime-rl process left."""
    made: list[PrivateTmux] = []
    runs: list[SimRun] = []

    def make(session: str = "prime-rl", window: str = "Launcher") -> PrivateTmux:
        made.append(PrivateTmux(session, window))
        return made[-1]

    make.runs = runs  # type: ignore[attr-defined]
    yield make
    for server in made:
        server.kill()
    for run in runs:
        wait_for(lambda run=run: not run.roles(), 10, f"the processes of {run.dir} to end")


def launch(tmux: PrivateTmux, run: SimRun, registry) -> None:
    """Type the run's launch command into the Launcher pane, as a person would."""
    registry.runs.append(run)
    tmux.type(run.launch_line)
    wait_for(lambda: "Trainer" in run.roles(), 20, "the simulated run's Trainer")


def crashed_h_run(root: Path, *, name: str = "crashed-run", crash_message: str = "Fatal error in train", steps: int = 12) -> HRun:
    """A run dir (no processes) that crashed after `steps` steps, complete checkpoint at step 10."""
    run = HRun(root, name)
    run.steps(steps)
    run.log("trainer.log", "ERROR", crash_message)
    for step in (5, 10):
        (run.dir / "checkpoints" / f"step_{step}" / "trainer").mkdir(parents=True)
        (run.dir / "checkpoints" / f"step_{step}" / "trainer" / ".metadata").write_text("x")
        (run.dir / "checkpoints" / f"step_{step}" / "orchestrator").mkdir(parents=True)
        (run.dir / "checkpoints" / f"step_{step}" / "orchestrator" / "progress.pt").write_text("x")
    return run
