"""`rlagent run RUN_DIR --cadence 1h`: a check-in at once, then one per cadence (graph.cadence),
until Ctrl-C or `--max-checks`; a decision left pending is offered between check-ins."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated

import typer

from rlagent.commands.common import (
    ApproveOpt,
    ConfigOpt,
    FrameworkOpt,
    HomeOpt,
    LaunchOpt,
    LlmOpt,
    RunDir,
    SessionOpt,
    SocketOpt,
    TzOpt,
    VerboseOpt,
    open_monitor,
    say_write_outcome,
    setup_logging,
    summary_line,
    watch_settings,
)
from rlagent.commands.console import err, out
from rlagent.commands.offer import action_config, offer
from rlagent.commands.progress import working
from rlagent.models.actions import ApprovalMode


def run(
    run_dir: RunDir,
    cadence: Annotated[str | None, typer.Option("--cadence", help="Time between check-ins: 30s, 10m, 1h, 1h30m.")] = None,
    max_checks: Annotated[int | None, typer.Option("--max-checks", help="Stop after N check-ins.", min=1)] = None,
    offline: Annotated[bool, typer.Option("--offline", help="A recorded run: no live probes.")] = False,
    no_write: Annotated[
        bool, typer.Option("--no-write", help="A preview: leave STATUS.md and the run's state untouched.")
    ] = False,
    config: ConfigOpt = None,
    home: HomeOpt = None,
    log_timezone: TzOpt = None,
    approve: ApproveOpt = None,
    session: SessionOpt = None,
    tmux_socket: SocketOpt = None,
    launch_command: LaunchOpt = None,
    llm: LlmOpt = None,
    framework: FrameworkOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Check in at once, then once per cadence, until Ctrl-C (or --max-checks)."""
    setup_logging(verbose)
    settings = watch_settings(
        config,
        offline,
        no_write,
        home,
        log_timezone,
        approve,
        session,
        tmux_socket,
        launch_command,
        llm,
        cadence=cadence,
        max_checks=max_checks,
    )
    from rlagent.agents.report import build_report
    from rlagent.graph.cadence import at_cadence
    from rlagent.graph.runner import DecisionPending
    from rlagent.graph.store import RunLocked
    from rlagent.tools.approval import interactive

    monitor = open_monitor(run_dir, settings, actions=action_config(settings), framework=framework)
    ask = interactive() and settings.approve is ApprovalMode.ASK
    out.print(f"watching {monitor.run.run_dir} every {settings.cadence} (Ctrl-C to stop)", markup=False)
    status = Path(monitor.run.run_dir) / "STATUS.md"
    out.print(f"entries go to {status}" if settings.write else f"--no-write: {status} is left untouched", markup=False)
    rounds = {"done": 0, "started": monitor.clock.now()}

    failed = False  # the last check-in could not be written (or made)

    def one_round() -> None:
        nonlocal failed
        fresh = True
        try:
            with working("checking in", enabled=rounds["done"] == 0):
                report = build_report(monitor.check_in())
            out.print(summary_line(report))
            failed = say_write_outcome(report)
        except DecisionPending as exc:
            # No check-in while a person may still answer: a new one would drop the decision.
            out.print(f"check-in skipped: {exc}", markup=False)
            fresh = False
        except RunLocked as exc:
            err.print(f"rlagent: check-in skipped: {exc}", markup=False)
            fresh, failed = False, True
        if (fresh or ask) and monitor.pending():
            offer(monitor, timeout_s=settings.seconds("approval_timeout"), interactive=ask, where="rlagent run")
        rounds["done"] += 1
        if settings.max_checks is None or rounds["done"] < settings.max_checks:
            due = max(rounds["started"] + timedelta(seconds=rounds["done"] * settings.cadence_seconds), monitor.clock.now())
            out.print(f"  [dim]next check-in at {due.astimezone():%H:%M:%S} (every {settings.cadence})[/]", markup=True)

    try:
        at_cadence(one_round, settings.cadence_seconds, monitor.clock, settings.max_checks)
        if failed:  # the last check-in could not be written (or made): not a success
            raise typer.Exit(1)
    except KeyboardInterrupt:
        out.print("stopped (Ctrl-C); STATUS.md holds only complete entries")
        raise typer.Exit(130) from None
    finally:
        monitor.close()
