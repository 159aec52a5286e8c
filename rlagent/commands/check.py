"""`rlagent check RUN_DIR`: one check-in now; its entry is appended to STATUS.md and printed (or
the JSON report with `--json`), then any decision it leaves pending is offered."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.markup import escape

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
    setup_logging,
    summary_line,
    watch_settings,
    where_written,
    write_failed,
)
from rlagent.commands.console import out
from rlagent.commands.offer import action_config, offer, succeeded
from rlagent.commands.progress import working
from rlagent.commands.render import show_entry
from rlagent.models.actions import ApprovalMode


def check(
    run_dir: RunDir,
    offline: Annotated[bool, typer.Option("--offline", help="A recorded run: no process, tmux, HTTP or SLURM probes.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the check-in report as JSON on stdout, nothing else.")] = False,
    no_write: Annotated[
        bool, typer.Option("--no-write", help="A preview: leave STATUS.md and the run's state untouched.")
    ] = False,
    full: Annotated[bool, typer.Option("--full", help="Show each finding's evidence and the review blocks too.")] = False,
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
    """One check-in now: diagnose the run and append an entry to its STATUS.md."""
    setup_logging(verbose)
    settings = watch_settings(config, offline, no_write, home, log_timezone, approve, session, tmux_socket, launch_command, llm)
    from rlagent.agents.report import build_report
    from rlagent.graph.runner import DecisionPending
    from rlagent.tools.approval import interactive

    monitor = open_monitor(run_dir, settings, actions=action_config(settings), framework=framework)
    ask = interactive() and not as_json and settings.approve is ApprovalMode.ASK
    try:
        try:
            with working(f"checking {monitor.run.run_dir}", enabled=not as_json):
                state = monitor.check_in()
        except DecisionPending as exc:
            if as_json:  # stdout stays JSON: what is pending, and that no check-in was made
                pending = {"run_dir": monitor.run.run_dir, "checkin": None, "pending": exc.request.model_dump(mode="json")}
                sys.stdout.write(json.dumps(pending, indent=2) + "\n")
                return
            out.print(f"no new check-in: {exc}", markup=False)
            offer(monitor, timeout_s=settings.seconds("approval_timeout"), interactive=ask, where="rlagent check")
            return
        found = monitor.pending()
        report = build_report(state, found[1] if found else None)
        if as_json:
            sys.stdout.write(json.dumps(report, indent=2) + "\n")
            write_failed(report)
            return
        out.print(summary_line(report))
        if report["picked_from"]:
            out.print(f"(newest run in {escape(report['picked_from'])}: {escape(report['run_dir'])})")
        out.print()
        show_entry(report["status_entry"], full=full)
        out.print(where_written(report, settings), markup=False)
        write_failed(report)
        if found:
            decided = offer(monitor, timeout_s=settings.seconds("approval_timeout"), interactive=ask, where="rlagent check")
            if decided is not None and not succeeded(decided.out.launch):
                raise typer.Exit(1)
    finally:
        monitor.close()
