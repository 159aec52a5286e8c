"""The person in the loop: the terminal prompt (default No, timeout), the pending decision that
survives the monitor's death and is answered from another process, expiry, and observe-only."""

import os
import pty
import select
import shlex
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest

from rlagent.graph.runner import ActionConfig, DecisionPending, Effects, Monitor, NothingPending
from rlagent.models.actions import ApprovalMode, LaunchStatus
from rlagent.tools.approval import Answer, ask
from rlagent.tools.clock import SystemClock
from rlagent.tools.layout import discover_run

from launchkit import SimRun, crashed_h_run, launch, tmux_servers, wait_for  # noqa: F401

RLAGENT = [sys.executable, "-m", "rlagent"]
LAUNCH = "uv run rl @ examples/reverse_text/rl.toml"


def _answer(text: bytes | None, timeout_s: float = 2.0) -> Answer:
    read, write = os.pipe()
    if text is not None:
        os.write(write, text)
        if not text.endswith(b"\n"):
            os.close(write)  # end of input
            write = None
    with os.fdopen(read) as stdin, open(os.devnull, "w") as stdout:
        try:
            return ask("Send?", timeout_s=timeout_s, stdin=stdin, stdout=stdout)
        finally:
            if write is not None:
                os.close(write)


def test_the_prompt_defaults_to_no_and_times_out():
    assert _answer(b"y\n") is Answer.YES and _answer(b" YES \n") is Answer.YES
    for text in (b"\n", b"n\n", b"sure\n", b"yes please\n", b""):
        assert _answer(text) is Answer.NO, text
    started = time.monotonic()
    assert _answer(None, timeout_s=0.3) is Answer.TIMEOUT
    assert time.monotonic() - started < 2


class Terminal:
    """A command run on a pseudo-terminal, as a person runs it."""

    def __init__(self, args, env=None):
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
        os.close(slave)
        self.output = b""

    def expect(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while text.encode() not in self.output:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {text!r} within {timeout} s; got:\n{self.output.decode(errors='replace')}")
            ready, _, _ = select.select([self.master], [], [], remaining)
            if ready:
                try:
                    self.output += os.read(self.master, 65536)
                except OSError:
                    if self.proc.poll() is not None:
                        raise AssertionError(f"exited before {text!r}:\n{self.output.decode(errors='replace')}") from None
        return self.output.decode(errors="replace")

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def finish(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                try:
                    self.output += os.read(self.master, 65536)
                except OSError:
                    break
        code = self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        os.close(self.master)
        return code


@pytest.mark.tmux
def test_rlagent_check_in_a_terminal_asks_no_sends_nothing_yes_sends_the_command(tmp_path, tmux_servers):  # noqa: F811
    tmux = tmux_servers()
    run = SimRun(tmp_path, crash_at=5, ckpt=2, step_seconds=0.2, max_steps=60)
    launch(tmux, run, tmux_servers)
    wait_for(tmux.idle, 30, "the crash")
    args = [*RLAGENT, "check", str(run.dir), "--tmux-socket", tmux.socket, "--launch-command", run.launch_line]
    env = {**os.environ, "RLAGENT_HOME": str(tmp_path / "home"), "RLAGENT_VERIFY_TIMEOUT": "30s", "COLUMNS": "250"}
    expected = shlex.join(run.resume_argv(4))

    no = Terminal(args, env)
    shown = no.expect("[y/N]")
    assert expected in shown and "evidence auditor: APPROVE" in shown and "effect reviewer: APPROVE" in shown
    before = tmux.text()
    no.send("n\n")
    assert no.finish() == 0 and "declined" in no.output.decode()
    assert tmux.text() == before and "--resume.step" not in tmux.text()

    yes = Terminal(args, env)
    yes.expect("[y/N]")
    yes.send("y\n")
    assert yes.finish() == 0, yes.output.decode()
    assert "restart verified" in yes.output.decode()
    assert tmux.text().count(expected) == 1
    status = run.status()
    assert "declined by" in status and status.count("<!-- rlagent:followup") == 2 and "restart verified" in status


@pytest.mark.tmux
def test_approval_from_a_second_process_after_the_monitor_was_killed(tmp_path, tmux_servers):  # noqa: F811
    tmux = tmux_servers()
    run = SimRun(tmp_path, crash_at=5, ckpt=2, step_seconds=0.2, max_steps=60)
    launch(tmux, run, tmux_servers)
    wait_for(tmux.idle, 30, "the crash")
    env = {**os.environ, "RLAGENT_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1"}
    watcher = subprocess.Popen(
        [*RLAGENT, "run", str(run.dir), "--cadence", "1h", "--tmux-socket", tmux.socket, "--launch-command", run.launch_line],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        text=True,
    )
    observer = Monitor(discover_run(run.dir), home=tmp_path / "home")
    try:
        wait_for(observer.pending, 60, "the pending decision in the state store", every=0.2)
    finally:
        observer.close()
        watcher.send_signal(signal.SIGKILL)  # the monitor dies; its decision stays in the state store
        watcher.communicate(timeout=10)
    status = subprocess.run([*RLAGENT, "status", str(run.dir)], capture_output=True, text=True, env=env, timeout=60)
    assert status.returncode == 0 and "rlagent approve" in status.stdout and "--resume.step 4" in status.stdout
    done = subprocess.run([*RLAGENT, "approve", str(run.dir), "--yes"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "restart verified" in done.stdout
    assert tmux.text().count(shlex.join(run.resume_argv(4))) == 1
    again = subprocess.run([*RLAGENT, "approve", str(run.dir), "--no"], capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 1 and "no decision is pending" in again.stderr


def _monitor(run, tmp_path, now, approve=ApprovalMode.ASK):
    actions = ActionConfig(approve=approve, launch_command=LAUNCH, decision_expiry_s=7200)
    return Monitor(
        discover_run(run.dir), home=tmp_path / "home", effects=Effects(clock=SystemClock(lambda: now[0])), actions=actions
    )


def test_a_pending_decision_blocks_checkins_then_expires_as_no(tmp_path):
    run = crashed_h_run(tmp_path)
    now = [run.clock]
    monitor = _monitor(run, tmp_path, now)
    monitor.check_in()
    request_id, request = monitor.pending()
    assert request.expires_at == run.clock + timedelta(hours=2)
    now[0] += timedelta(hours=1)
    with pytest.raises(DecisionPending, match="rlagent approve"):
        _monitor(run, tmp_path, now).check_in()  # another monitor: still pending, no new check-in
    late = _monitor(run, tmp_path, now)
    now[0] += timedelta(hours=1, minutes=1)
    state = late.decide(True, by="too late", request_id=request_id)  # approved after expiry: not sent
    assert state.out.launch.status is LaunchStatus.EXPIRED and state.out.launch.sent is None and state.memory.dispatches == []
    with pytest.raises(NothingPending):
        late.decide(True, by="again", request_id=request_id)

    monitor = _monitor(run, tmp_path, now)
    state = monitor.check_in()  # proposes again
    _, request = monitor.pending()
    now[0] += timedelta(hours=3)
    next_state = _monitor(run, tmp_path, now).check_in()  # first closes the expired one, then checks in
    assert next_state.checkin == state.checkin + 1
    assert "no answer, expired" in run.status() and "Sent to" not in run.status()
    assert run.status().count("<!-- rlagent:followup") == 2


def test_approve_never_observes_only(tmp_path):
    run = crashed_h_run(tmp_path)
    now = [run.clock]
    monitor = _monitor(run, tmp_path, now, approve=ApprovalMode.NEVER)
    state = monitor.check_in()
    assert state.out.reviews[-1].agreed and monitor.pending() is None and state.out.launch is None
    assert "Not offered for approval: observe only (--approve never)" in state.out.status_entry
    args = [*RLAGENT, "check", str(run.dir), "--approve", "never", "--launch-command", LAUNCH]
    terminal = Terminal(args, {**os.environ, "RLAGENT_HOME": str(tmp_path / "home2")})
    assert terminal.finish() == 0
    assert "[y/N]" not in terminal.output.decode() and "Not offered for approval" in terminal.output.decode()
