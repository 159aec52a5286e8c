"""`rlagent demo`: the whole loop on a simulated prime-rl run, in a private tmux server.

It types `rlagent simulate crash-python-h ... --live` (the project's prime-rl simulator: real
`PRIME-RL::*` processes writing prime-rl's files) into the `Launcher` window of its own tmux
server (`tmux -L rlagent-demo-PID`), watches the run at a fast cadence, shows the diagnosis when
it crashes, the review and the approval prompt; on Yes, the restart and its verification. The
tmux server, the simulated run and the temporary directory are its own and are removed at the
end, also on Ctrl-C. It never touches your tmux server or any other process.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from rlagent.commands.common import fail, summary_line
from rlagent.commands.console import err, out
from rlagent.commands.offer import offer, print_outcome, who
from rlagent.tools import interrupts

SCENARIO = "crash-python-h"
"""The orchestrator dies of a Python exception at step 21; checkpoints every 10 steps."""
STEP_TIME_S = 10.0
"""Simulated seconds per step (`--step-time`); the demo's speed sets how fast they pass."""


def start_run(tmp: Path, socket_name: str, *, step_seconds: float):
    """A private tmux server with `prime-rl:Launcher`, and the simulated run launched in it.
    Returns (server, run_dir, the launch command line)."""
    import libtmux

    from rlagent.models.actions import TmuxTarget
    from rlagent.tools.tmux import open_launcher

    server = libtmux.Server(socket_name=socket_name)
    # The pane starts in the demo's own directory: `python -m rlagent` started in a checkout would
    # import the source folder `rlagent/` (without agents/, graph/... mapped in) instead of the
    # installed package.
    server.new_session(
        session_name="prime-rl",
        window_name="Launcher",
        detach=True,
        x=220,
        y=50,
        start_directory=str(tmp),
        window_command="bash --norc --noprofile",
    )
    argv = [sys.executable, "-m", "rlagent", "simulate", SCENARIO, str(tmp / "outputs"), "--live", "--run.name", "demo-run"]
    argv += ["--step-time", f"{STEP_TIME_S:g}", "--speed", f"{STEP_TIME_S / step_seconds:g}"]
    line = shlex.join(argv)
    open_launcher(TmuxTarget(socket=socket_name)).send_line(line)
    return server, tmp / "outputs" / "demo-run", line


def wait_for_start(run_dir: Path, socket_name: str, timeout_s: float = 60.0) -> str | None:
    """Wait until the simulated run has started; None if it did, else why not (the pane's last
    lines when the command ended at once: its error shows here, not only inside tmux)."""
    from rlagent.models.actions import TmuxTarget
    from rlagent.tools.tmux import TmuxError, open_launcher

    pane = open_launcher(TmuxTarget(socket=socket_name))
    started = time.monotonic()
    while not (run_dir / "logs" / "latest").exists():
        waited = time.monotonic() - started
        if waited > timeout_s:
            return f"the simulated run did not start within {timeout_s:.0f} s"
        try:
            ended = waited > 2.0 and pane.busy_with() is None
        except TmuxError as exc:
            return f"its tmux server went away: {exc}"
        if ended and not (run_dir / "logs" / "latest").exists():
            tail = [line for line in pane.lines() if line.strip()][-12:]
            return "the simulated run ended at once; its window shows:\n" + "\n".join(f"  | {line}" for line in tail)
        interrupts.sleep(0.1)
    return None


def stop_server(server, run_dir: Path, timeout_s: float = 10.0) -> list[int]:
    """Kill the demo's own tmux server (its shell and the simulated run get SIGHUP) and wait for
    the run's processes to end; returns the pids of any that did not."""
    from rlagent.tools.processes import find_run_processes
    from rlagent.tools.tmux import socket_file

    with contextlib.suppress(Exception):  # already gone
        server.kill()
    with contextlib.suppress(OSError):
        socket_file(server.socket_name).unlink()
    deadline = time.monotonic() + timeout_s
    left: list[int] = []
    while time.monotonic() < deadline:
        left = [p.pid for p in find_run_processes(run_dir, run_dir.name)[0]] if run_dir.exists() else []
        if not left:
            break
        time.sleep(0.2)  # cleanup, after a Ctrl-C too: not interrupts.sleep
    return left


def demo(
    answer: Annotated[
        str | None, typer.Option("--answer", help="Answer the prompt without a terminal: yes or no (for scripted runs).")
    ] = None,
    step_seconds: Annotated[float, typer.Option("--step-seconds", help="Real seconds per simulated step.", min=0.05)] = 0.5,
    keep: Annotated[bool, typer.Option("--keep", help="Keep the demo's directory (run, STATUS.md, state) afterwards.")] = False,
) -> None:
    """Watch a simulated prime-rl run crash, get diagnosed and, on your Yes, restarted (needs tmux).

    You see the diagnosis, the review and the approval prompt, and on Yes the restart and its
    verification, all in a private tmux server that is removed at the end."""
    from rlagent.graph.runner import ActionConfig, Monitor
    from rlagent.models.actions import ApprovalMode, TmuxTarget
    from rlagent.tools.approval import interactive
    from rlagent.tools.layout import discover_run

    if answer not in (None, "yes", "no"):
        raise typer.BadParameter("--answer takes yes or no")
    if shutil.which("tmux") is None:
        fail("rlagent demo needs tmux (Debian/Ubuntu: sudo apt-get install tmux; macOS: brew install tmux)")
    tmp = Path(tempfile.mkdtemp(prefix="rlagent-demo-"))
    socket_name = f"rlagent-demo-{os.getpid()}"
    server, monitor, run_dir = None, None, tmp / "outputs" / "demo-run"
    try:
        server, run_dir, line = start_run(tmp, socket_name, step_seconds=step_seconds)
        out.print(
            f"simulated prime-rl run ({SCENARIO}) started in tmux -L {socket_name}, window prime-rl:Launcher:", markup=False
        )
        out.print(f"  $ {line}", markup=False)
        out.print(f"  (watch it from another terminal: tmux -L {socket_name} attach -t prime-rl)", markup=False)
        problem = wait_for_start(run_dir, socket_name)
        if problem is not None:
            err.print(f"rlagent: error: {problem}", markup=False)
            raise typer.Exit(1)
        actions = ActionConfig(
            approve=ApprovalMode.ASK,
            target=TmuxTarget(socket=socket_name),
            launch_command=line,  # the demo launched the run: it knows its launch command
            verify_timeout_s=60,
            verify_poll_s=0.5,
            notify=lambda text: out.print(f"  {text}", markup=False),
        )
        monitor = Monitor(discover_run(run_dir), home=tmp / "state", actions=actions)
        _watch(monitor, answer, interactive(), step_seconds)
        if keep:
            out.print(f"kept {tmp} (STATUS.md in {run_dir})", markup=False)
    except KeyboardInterrupt:
        out.print("stopped (Ctrl-C)")
        raise typer.Exit(130) from None  # after the cleanup below, as `run` and `watch` end
    finally:
        if monitor is not None:
            monitor.close()
        if server is not None:
            left = stop_server(server, run_dir)
            alive = f"; still alive: {escape(str(left))}" if left else ""
            out.print(f"removed the demo's tmux server (tmux -L {socket_name})" + alive)
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def _watch(monitor, answer: str | None, terminal: bool, step_seconds: float) -> None:
    """Check in every second until the crash has been decided on and, on Yes, verified."""
    from rlagent.agents.report import build_report

    deadline = time.monotonic() + 120 + 60 * step_seconds
    while time.monotonic() < deadline:
        state = monitor.check_in()
        report = build_report(state)
        out.print(summary_line(report))
        found = monitor.pending()
        if found is None:
            interrupts.sleep(1.0)
            continue
        out.print()
        out.print(report["status_entry"], markup=False)
        if answer is not None:
            out.print(f"(answering {answer} in 2 s, as a person reading the above would)", markup=False)
            interrupts.sleep(2.0)
            state = monitor.decide(answer == "yes", by=who(f"rlagent demo --answer {answer}"), request_id=found[0])
            print_outcome(state)
        elif terminal:
            state = offer(monitor, timeout_s=600, interactive=True, where="rlagent demo")
        else:  # the demo removes its run at the end: no decision can wait for `rlagent approve`
            out.print(
                "no terminal to ask you in: counted as No, nothing sent (run `rlagent demo` in a terminal, "
                "or pass --answer yes to see the restart)",
                markup=False,
            )
            state = monitor.decide(False, by=who("rlagent demo, no terminal"), request_id=found[0])
        if state is not None and state.out.launch is not None and state.out.launch.sent:
            interrupts.sleep(max(2.0, 3 * step_seconds))
            out.print(summary_line(build_report(monitor.check_in())))
        status = Path(monitor.run.run_dir) / "STATUS.md"
        out.print(f"\nSTATUS.md of the simulated run ({status}):\n", markup=False)
        out.print(status.read_text(encoding="utf-8") if status.exists() else "(none)", markup=False)
        return
    out.print("the demo ran out of time before a decision")
