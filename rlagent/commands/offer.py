"""The approval prompt that `check`, `run`, `demo` and `approve` show in a terminal: the exact
command, why, every reviewer's verdict; default No; no answer within the timeout leaves it
pending (for `rlagent approve` from any terminal). Also the monitor's action settings and the
lines that report a decision's outcome."""

from __future__ import annotations

import getpass
import os
import socket

from rich.markup import escape

from rlagent.commands.console import err, out
from rlagent.models.actions import LaunchStatus


def who(where: str) -> str:
    """The person answering, in words, for the follow-up entry."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid {os.getuid()}"
    return f"{user}@{socket.gethostname()} ({where}, pid {os.getpid()})"


def action_config(settings, notify=None):
    """The monitor's action settings from the user's settings (flags > env > config file)."""
    from rlagent.graph.runner import ActionConfig
    from rlagent.models.actions import TmuxTarget

    return ActionConfig(
        approve=settings.approve,
        target=TmuxTarget(socket=settings.tmux_socket, session=settings.session),
        launch_command=settings.launch_command,
        decision_expiry_s=settings.seconds("decision_expiry"),
        verify_timeout_s=settings.seconds("verify_timeout"),
        max_restarts_per_day=settings.max_restarts_per_day,
        notify=notify or (lambda line: out.print(f"  [dim]{escape(line)}[/]", markup=True)),  # it may quote pane text
    )


def pending_hint(request, run_dir: str) -> str:
    return (
        f"pending until {request.expires_at:%Y-%m-%d %H:%M} UTC: answer from any terminal with "
        f"`rlagent approve {run_dir} --yes` (or `--no`); `rlagent status {run_dir}` shows it"
    )


def succeeded(launch) -> bool:
    """A decision carried out as asked: declined, or sent and verified."""
    if launch.status is LaunchStatus.DECLINED:
        return True
    return launch.status is LaunchStatus.SENT and launch.verification is not None and launch.verification.ok


def print_outcome(state) -> bool:
    """Say what became of the decision (a failure on stderr); True unless it failed."""
    launch = state.out.launch
    if launch is None:
        return True
    ok = succeeded(launch)
    style = "bold green" if launch.status is LaunchStatus.SENT and ok else "bold" if ok else "bold red"
    (out if ok else err).print(f"[{style}]{launch.status.value}[/]: {escape(launch.note)}", markup=True)  # it may quote the pane
    if launch.sent:
        out.print(f"sent to {launch.target.describe()}: {launch.sent}", markup=False)
    return ok


def offer(monitor, *, timeout_s: float, interactive: bool, where: str) -> object | None:
    """Show the pending decision; in a terminal ask (default No); else say how to answer.
    Returns the state after an answer, None when it stays pending."""
    from rlagent.graph.runner import CannotSend, NothingPending
    from rlagent.tools.approval import Answer, ask, render_request

    found = monitor.pending()
    if found is None:
        return None
    request_id, request = found
    run_dir = monitor.run.run_dir
    out.print()
    out.print(render_request(request, run_dir), markup=False)
    out.print()
    if not interactive:
        out.print(pending_hint(request, run_dir), markup=False)
        return None
    answer = ask(f"Send this exact command to {request.target.describe()}?", timeout_s=timeout_s)
    if answer is Answer.TIMEOUT:
        out.print(f"no answer within {timeout_s:.0f} s: counted as No for now; nothing sent.", markup=False)
        out.print(pending_hint(request, run_dir), markup=False)
        return None
    try:
        state = monitor.decide(answer is Answer.YES, by=who(where), request_id=request_id)
    except (NothingPending, CannotSend) as exc:
        err.print(f"rlagent: error: {exc}", markup=False)
        return None
    print_outcome(state)
    return state
