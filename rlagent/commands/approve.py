"""`rlagent approve RUN_DIR [--yes | --no]`: answer the decision a check-in left pending, from any
terminal, also after the monitor that asked was stopped or killed (the SQLite checkpointer).
The prompt itself (shared with `check`, `run` and `demo`) is rlagent.commands.offer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rlagent.commands.common import err, fail, open_monitor, out, settings_from
from rlagent.commands.offer import action_config, offer, print_outcome, who


def approve(
    run_dir: Annotated[Path, typer.Argument(help="The run directory whose pending decision to answer.")],
    yes: Annotated[bool, typer.Option("--yes", help="Approve the exact command shown and send it.")] = False,
    no: Annotated[bool, typer.Option("--no", help="Decline it: nothing is sent.")] = False,
    config: Annotated[Path | None, typer.Option("--config", help="TOML settings file.")] = None,
    home: Annotated[Path | None, typer.Option("--home", help="Where run state is kept (env RLAGENT_HOME).")] = None,
    verify_timeout: Annotated[str | None, typer.Option("--verify-timeout", help="How long to verify a sent restart.")] = None,
) -> None:
    """Answer the decision a check-in left pending (it shows the exact command first)."""
    from rlagent.graph.runner import NothingPending
    from rlagent.tools.approval import interactive, render_request

    if yes and no:
        fail("--yes and --no together: choose one")
    settings = settings_from(config, home=home, verify_timeout=verify_timeout)
    monitor = open_monitor(run_dir, settings, actions=action_config(settings))
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
                out.print(render_request(found[1], monitor.run.run_dir), markup=False)
                fail("no terminal to ask in: pass --yes or --no")
            state = offer(monitor, timeout_s=settings.seconds("approval_timeout"), interactive=True, where="rlagent approve")
            raise typer.Exit(0 if state is not None else 1)
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
            fail(str(exc))
        print_outcome(state)
    finally:
        monitor.close()
