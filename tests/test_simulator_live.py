"""`rlagent simulate --live` for real: a launcher subprocess, its titled children, files growing
in real time, crash and resume as prime-rl does them, and no process left behind.

The command runs through a minimal typer app holding only `simulate` (the same function the
`rlagent` CLI registers), so these tests depend on nothing else in the CLI. Every wait is bounded.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

ANSI = re.compile(r"\x1b\[[0-9;]*m")
STEP = re.compile(r"SUCCESS Step (\d+) \|")
RUNNER = "import typer; from rlagent.commands.simulate import simulate; app = typer.Typer(); app.command()(simulate); app()"
CHILD_TITLES = {"PRIME-RL::Trainer", "PRIME-RL::Orchestrator", "PRIME-RL::Inference", "PRIME-RL::EnvServer"}
FAST = ["--step-time", "10", "--speed", "120"]  # the orchestrator needs ~60 ms of CPU per step


def start(*args: object) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", RUNNER, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # Ctrl-C is sent by the test, not by the terminal
    )


SLACK = 3.0
"""Waits are bounds, not expectations: a loaded 2-core machine starves the simulated processes of CPU
(the suite runs beside other work), so each bound is this many times what a quiet machine needs."""


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> object:
    timeout *= SLACK
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def finish(proc: subprocess.Popen, timeout: float = 20) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout * SLACK)
    return proc.returncode, ANSI.sub("", out.decode())


def steps(path: Path) -> list[int]:
    try:
        return [int(m.group(1)) for m in STEP.finditer(ANSI.sub("", path.read_text()))]
    except FileNotFoundError:
        return []


def titled_children(launcher: int) -> dict[str, psutil.Process]:
    try:
        kids = psutil.Process(launcher).children()
    except psutil.NoSuchProcess:
        return {}
    return {p.name(): p for p in kids if p.name().startswith("PRIME-RL::")}


@pytest.fixture
def launched():
    """Every launcher a test starts is stopped and reaped, even when the test fails."""
    procs: list[subprocess.Popen] = []

    def _start(*args: object) -> subprocess.Popen:
        procs.append(start(*args))
        return procs[-1]

    yield _start
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_a_live_run_grows_with_titled_processes_and_stops_cleanly_on_ctrl_c(tmp_path, launched):
    run = tmp_path / "run"
    proc = launched("healthy-h", run, "--live", *FAST)
    log = run / "logs/attempt_1/trainer.log"
    wait_for(lambda: len(steps(log)) >= 2, 20, "two trainer steps")
    kids = wait_for(lambda: (k := titled_children(proc.pid)) and set(k) == CHILD_TITLES and k, 10, "the titled children")
    assert psutil.Process(proc.pid).name() == "PRIME-RL::Launcher"
    # each child holds its own log open: how a monitor ties a titled process to its run
    held = {name: {Path(f.path) for f in p.open_files()} for name, p in kids.items()}
    assert log in held["PRIME-RL::Trainer"] and run / "metrics.jsonl" in held["PRIME-RL::Trainer"]
    assert run / "logs/attempt_1/orchestrator.log" in held["PRIME-RL::Orchestrator"]
    assert run / "logs/attempt_1/inference.log" in held["PRIME-RL::Inference"]
    assert run / "logs/attempt_1/envs/train/reverse-text.log" in held["PRIME-RL::EnvServer"]
    # files grow as simulated time passes, one step after the other
    first = len(steps(log)), (run / "metrics.jsonl").stat().st_size
    wait_for(lambda: len(steps(log)) >= first[0] + 3, 20, "three more steps")
    assert (run / "metrics.jsonl").stat().st_size > first[1]
    assert steps(log) == list(range(1, len(steps(log)) + 1))
    ckpt = run / "checkpoints/step_10"
    wait_for(lambda: (ckpt / "trainer/.metadata").is_file() and (ckpt / "orchestrator/progress.pt").is_file(), 20, "step 10")
    pids = [p.pid for p in kids.values()]
    os.kill(proc.pid, signal.SIGINT)
    code, out = finish(proc)
    assert code == 1
    assert "WARNING Received interrupt signal, terminating all processes..." in out
    assert "SUCCESS Startup complete. Showing orchestrator logs..." in out and "SUCCESS Step 1 |" in out  # tail -F
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


def test_a_crash_exits_1_and_a_resume_continues_from_the_checkpoint_in_a_new_attempt(tmp_path, launched):
    out_dir = tmp_path / "outputs"
    crash = launched("crash-oom-h", out_dir, "--live", "--run.name", "myrun", "--onset", "14", *FAST)
    code, out = finish(crash, timeout=40)
    run = out_dir / "myrun"
    assert code == 1, out
    assert out.splitlines()[-2:] == [
        out.splitlines()[-2][:9] + "  ERROR Error: Trainer failed with exit code 1",
        out.splitlines()[-1][:9] + "  ERROR Terminating all processes...",
    ]
    trainer = ANSI.sub("", (run / "logs/attempt_1/trainer.log").read_text())
    assert "ERROR Fatal error in train" in trainer and "torch.OutOfMemoryError: CUDA out of memory" in trainer
    assert max(steps(run / "logs/attempt_1/trainer.log")) == 13
    assert f"{run}/metrics.jsonl" in ANSI.sub("", (run / "logs/attempt_1/orchestrator.log").read_text())

    resumed = launched("crash-oom-h", out_dir, "--live", "--run.name", "myrun", "--resume.step", "10", *FAST)
    log = run / "logs/attempt_2/trainer.log"
    wait_for(lambda: max(steps(log), default=0) >= 15, 30, "steps past the crash")
    assert os.readlink(run / "logs/latest") == "attempt_2"
    text = ANSI.sub("", log.read_text())
    assert "Resuming training from checkpoint step 10" in text and steps(log)[0] == 11
    kids = [p.pid for p in titled_children(resumed.pid).values()]
    os.kill(resumed.pid, signal.SIGTERM)
    code, out = finish(resumed)
    assert code == 1 and "Resuming from step 10, cleaning future rollouts and broadcasts" in out
    assert "WARNING Received SIGTERM, terminating all processes..." in out
    assert not [pid for pid in kids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


def test_a_kernel_oom_kill_is_exit_code_minus_nine_and_layout_l_resumes_by_output_dir(tmp_path, launched):
    code, out = finish(launched("host-oom-h", tmp_path / "h", "--live", "--onset", "4", *FAST), timeout=30)
    assert code == 1 and "ERROR Error: Trainer failed with exit code -9" in out
    out_dir = tmp_path / "l"
    first = launched("crash-python-l", "--output-dir", out_dir, "--live", "--onset", "12", *FAST)
    code, out = finish(first, timeout=30)
    assert code == 1 and "ERROR Error: Orchestrator failed with exit code 1" in out
    assert "Fatal error in run_orchestrator" in ANSI.sub("", (out_dir / "logs/orchestrator.log").read_text())
    wrong = launched("crash-python-l", "--output-dir", out_dir, "--live", "--resume.step", "10")
    code, out = finish(wrong)
    assert code == 2 and "do not exist in layout L" in out
    again = launched("crash-python-l", "--output-dir", out_dir, "--live", "--ckpt.resume-step", "-1", *FAST)
    log = out_dir / "logs/trainer.log"
    wait_for(lambda: min(steps(log), default=0) == 11 and max(steps(log)) >= 13, 30, "L steps after the resume")
    assert "Resuming training from checkpoint step 10" in ANSI.sub("", log.read_text())  # L logs start over
    os.kill(again.pid, signal.SIGINT)
    assert finish(again)[0] == 1
