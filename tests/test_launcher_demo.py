"""`rlagent demo` as a new user runs it: crash, diagnosis, review, prompt, restart, verification,
and its private tmux server and simulated run gone at the end, also after Ctrl-C."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlagent.tools.processes import find_run_processes

from launchkit import wait_for

pytestmark = pytest.mark.tmux
RLAGENT = [sys.executable, "-m", "rlagent"]


def _server_gone(socket: str) -> bool:
    return subprocess.run(["tmux", "-L", socket, "ls"], capture_output=True).returncode != 0


def test_the_demo_runs_the_whole_loop_and_cleans_up(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [*RLAGENT, "demo", "--answer", "yes", "--step-seconds", "0.1", "--keep"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    for text in ("run_crashed", "Review round 1: agreed (unanimous)", "evidence auditor", "safety officer", "effect reviewer"):
        assert text in out
    assert "Awaiting a person's approval of this exact command" in out and "restart verified" in out
    socket = re.search(r"tmux -L (rlagent-demo-\d+)", out).group(1)
    assert _server_gone(socket) and "removed the demo's tmux server" in out
    run_dir = Path(re.search(r"kept (\S+)", out).group(1)) / "outputs" / "demo-run"
    assert find_run_processes(run_dir, run_dir.name)[0] == []
    assert (run_dir / "logs" / "attempt_2").is_dir()
    shutil.rmtree(run_dir.parent.parent)


def test_ctrl_c_stops_the_demo_and_removes_its_tmux_server(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [*RLAGENT, "demo", "--step-seconds", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    lines: list[str] = []
    wait_for(lambda: lines.append(proc.stdout.readline()) or "check-in #1" in "".join(lines), 60, "the first check-in")
    socket = re.search(r"tmux -L (rlagent-demo-\d+)", "".join(lines)).group(1)
    assert not _server_gone(socket)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130 and out.count("stopped (Ctrl-C)") == 1  # as `run` and `watch` end
    assert "removed the demo's tmux server" in out and "still alive" not in out
    assert _server_gone(socket)
    time.sleep(0.2)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("rlagent-demo-")]  # its directory is gone too
