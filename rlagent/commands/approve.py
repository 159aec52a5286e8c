"""`rlagent approve RUN_DIR [--yes | --no]`: answer the decision a check-in left pending, from any
terminal, also after the monitor that asked was stopped or killed (the SQLite checkpointer).
The prompt itself (shared with `check`, `run` and `demo`) is rlagent.commands.offer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rlagent.commands.common import ConfigOpt, HomeOpt, LaunchOpt, SessionOpt, SocketOpt, fail, open_monitor, settings_from
from rlagent.commands.console import err, out
from rlagent.commands.offer import action_config, offer, print_outcome, succeeded, who


def approve(
    run_dir: Annotated[Path, typer.Argument(help="The run directory whose pending decision to answer.")],
    yes: Annotated[bool, typer.Option("--yes", help="Approve the exact command shown and send it.")] = False,
    no: Annotated[bool, typer.Option("--no", help="Decline it: nothing is sent.")] = False,
    config: ConfigOpt = None,
    home: HomeOpt = None,
    verify_timeout: Annotated[str | None, typer.Option("--verify-timeout", help="How long to verify a sent restart.")] = None,
    session: SessionOpt = None,
    tmux_socket: SocketOpt = None,
    launch_command: LaunchOpt = None,
) -> None:
    """Answer the decision a check-in left pending (it shows the exact command first)."""
    from rlagent.graph.runner import CannotSend, NothingPending
    from rlagent.tools.approval import interactive, render_request

    if yes and no:
        fail("--yes and --no together: choose one")
    settings = settings_from(
        config,
        home=home,
        verify_timeout=verify_timeout,
        session=session,
        tmux_socket=tmux_socket,
        launch_command=launch_command,
    )
    monitor = open_monitor(run_dir, settings, actions=action_config(settings))
    try:
        closed = monitor.expire_if_due()
        if closed is not None:
            print_outcome(closed)
            raise typer.Exit(1)
        found = monitor.pending()
        if found is None:
            err.print(f"rlagent: error: no decision is pending for {monitor.run.run_dir}", markup=False)
            raise typer.Exit(1)
        mismatch = target_mismatch(found[1], session=session, tmux_socket=tmux_socket, launch_command=launch_command)
        if mismatch:
            fail(mismatch)
        if not (yes or no):
            if not interactive():
                out.print(render_request(found[1], monitor.run.run_dir), markup=False)
                fail("no terminal to ask in: pass --yes or --no")
            state = offer(monitor, timeout_s=settings.seconds("approval_timeout"), interactive=True, where="rlagent approve")
            raise typer.Exit(0 if state is not None and succeeded(state.out.launch) else 1)
        out.print(render_request(found[1], monitor.run.run_dir), markup=False)
        out.print()
        try:
            state = monitor.decide(
                yes,
                by=who("rlagent approve --yes" if yes else "rlagent approve --no"),
                request_id=found[0],
                how="approve_command",
            )
        except CannotSend as exc:
            err.print(f"rlagent: error: {exc}", markup=False)
            raise typer.Exit(1) from None
        except NothingPending as exc:
            fail(str(exc))
        if not print_outcome(state):
            raise typer.Exit(1)
    finally:
        monitor.close()


def target_mismatch(request, *, session: str | None, tmux_socket: str | None, launch_command: str | None) -> str | None:
    """The flags describe where and what to send; an approval is for the exact command and target
    shown, so flags that differ from the pending request are an error that says what to do."""
    target = request.target
    if (session is not None and session != target.session) or (tmux_socket is not None and tmux_socket != target.socket):
        return (
            f"the pending decision is for {target.describe()}, not "
            f"{session or target.session}:{target.window}{f' (tmux -L {tmux_socket})' if tmux_socket else ''}: "
            "answer it with --no, then check again with these flags to be asked about the new target"
        )
    if launch_command is not None and launch_command.strip() not in request.command:
        return (
            "the pending decision's command was built from another launch command; answer it with --no, "
            "then check again with --launch-command to be asked about the new one"
        )
    return None
