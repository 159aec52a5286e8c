"""`rlagent approve RUN_DIR [--yes | --no]`: answer the decision a check-in left pending, from any
terminal, also after the monitor that asked was stopped or killed (the SQLite checkpointer).

Also the approval prompt that `check`, `run` and `demo` show in a terminal: the exact command,
why, every reviewer's verdict; default No; no answer within the timeout leaves it pending.
"""

from __future__ import annotations

import getpass
import os
import socket
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from rlagent.models.actions import LaunchStatus

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


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
        notify=notify or (lambda line: out.print(f"  [dim]{line}[/]", markup=True)),
    )


def pending_hint(request, run_dir: str) -> str:
    return (
        f"pending until {request.expires_at:%Y-%m-%d %H:%M} UTC: answer from any terminal with "
        f"`rlagent approve {run_dir} --yes` (or `--no`); `rlagent status {run_dir}` shows it"
    )


def print_outcome(state) -> None:
    launch = state.out.launch
    if launch is None:
        return
    style = "bold green" if launch.status is LaunchStatus.SENT and launch.verification and launch.verification.ok else "bold"
    out.print(f"[{style}]{launch.status.value}[/]: {launch.note}", markup=True)
    if launch.sent:
        out.print(f"sent to {launch.target.describe()}: {launch.sent}", markup=False)


def offer(monitor, *, timeout_s: float, interactive: bool, where: str) -> object | None:
    """Show the pending decision; in a terminal ask (default No); else say how to answer.
    Returns the state after an answer, None when it stays pending."""
    from rlagent.agents.launcher import render_request
    from rlagent.graph.runner import NothingPending
    from rlagent.tools.approval import Answer, ask

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
    except NothingPending as exc:
        err.print(f"rlagent: {exc}")
        return None
    print_outcome(state)
    return state


def approve(
    run_dir: Annotated[Path, typer.Argument(help="The run directory whose pending decision to answer.")],
    yes: Annotated[bool, typer.Option("--yes", help="Approve the exact command shown and send it.")] = False,
    no: Annotated[bool, typer.Option("--no", help="Decline it: nothing is sent.")] = False,
    config: Annotated[Path | None, typer.Option("--config", help="TOML settings file.")] = None,
    home: Annotated[Path | None, typer.Option("--home", help="Where run state is kept (env RLAGENT_HOME).")] = None,
    verify_timeout: Annotated[str | None, typer.Option("--verify-timeout", help="How long to verify a sent restart.")] = None,
) -> None:
    """Answer the decision a check-in left pending (it shows the exact command first)."""
    from rlagent import cli
    from rlagent.graph.runner import NothingPending
    from rlagent.tools.approval import interactive

    if yes and no:
        cli._fail("--yes and --no together: choose one")
    settings = cli._settings(config, home=home, verify_timeout=verify_timeout)
    monitor = cli._monitor(run_dir, settings, actions=action_config(settings))
    try:
        closed = monitor.expire_if_due()
        if closed is not None:
            print_outcome(closed)
            raise typer.Exit(1)
        found = monitor.pending()
        if found is None:
            err.print(f"rlagent: no decision is pending for {monitor.run.run_dir}")
            raise typer.Exit(1)
        if not (yes or no):
            if not interactive():
                from rlagent.agents.launcher import render_request

                out.print(render_request(found[1], monitor.run.run_dir), markup=False)
                cli._fail("no terminal to ask in: pass --yes or --no")
            state = offer(monitor, timeout_s=settings.seconds("approval_timeout"), interactive=True, where="rlagent approve")
            raise typer.Exit(0 if state is not None else 1)
        from rlagent.agents.launcher import render_request

        out.print(render_request(found[1], monitor.run.run_dir), markup=False)
        out.print()
        try:
            state = monitor.decide(
                yes,
                by=who("rlagent approve --yes" if yes else "rlagent approve --no"),
                request_id=found[0],
                how="approve_command",
            )
        except NothingPending as exc:
            cli._fail(str(exc))
        print_outcome(state)
    finally:
        monitor.close()
