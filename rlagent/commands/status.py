"""`rlagent status RUN_DIR`: the run's last check-in and the decision it waits for, from the
state store alone (no new check-in, nothing probed, nothing sent)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from rlagent import import_late
from rlagent.commands.common import open_monitor, settings_from
from rlagent.commands.console import out
from rlagent.commands.offer import pending_hint


def status(
    run_dir: Annotated[Path, typer.Argument(help="A prime-rl run directory watched by rlagent.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print it as JSON.")] = False,
    config: Annotated[Path | None, typer.Option("--config", help="TOML settings file.")] = None,
    home: Annotated[Path | None, typer.Option("--home", help="Where run state is kept (env RLAGENT_HOME).")] = None,
) -> None:
    """Show the last check-in and any decision pending for the run; for a folder of runs, the fleet table."""
    from rlagent.commands import fleet_status

    settings = settings_from(config, home=home)
    if fleet_status.is_fleet(run_dir):
        fleet_status.fleet_status(run_dir, as_json, settings)
        return
    from rlagent.agents.llm.runtime import day_usage, llm_line, llm_report, usage_text
    from rlagent.tools.approval import render_request

    import_late("rlagent.graph.runner")  # one run: its monitor, and the graph stack with it (rlagent.cli)
    monitor = open_monitor(run_dir, settings)
    try:
        state, found = monitor.state(), monitor.pending()
    finally:
        monitor.close()
    request = found[1] if found else None
    if as_json:
        report = {
            "run_dir": monitor.run.run_dir,
            "checkin": state.checkin if state else 0,
            "health": state.out.health.value if state and state.out.health else None,
            "pending": request.model_dump(mode="json") if request else None,
            "launch": state.out.launch.model_dump(mode="json") if state and state.out.launch else None,
            "dispatches": [d.model_dump(mode="json") for d in state.memory.dispatches] if state else [],
            "llm": llm_report(state.out.llm) if state else None,
            "llm_day": day_usage(state.memory.llm_log, state.out.llm.at).model_dump() if state and state.out.llm else None,
            **fleet_status.run_alerts(settings.home, monitor.run.run_dir),
        }
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return
    out.print(
        f"run {monitor.run.run_dir} ({monitor.run.framework.value}"
        + (f", layout {monitor.run.layout.value})" if monitor.run.layout else ")"),
        markup=False,
    )
    if state is None or state.out.observation is None:
        out.print("no check-in yet")
        return
    obs = state.out.observation
    step = obs.trainer_step if obs.trainer_step is not None else obs.orchestrator_step
    findings = ", ".join(f"{f.id} ({f.severity.value})" for f in state.out.findings) or "no findings"
    health = state.out.health.value if state.out.health else "n/a"
    behind = " (catching up)" if obs.behind else ""  # its step is where the reading got to
    out.print(
        f"last check-in #{state.checkin} at {obs.now:%Y-%m-%d %H:%M} UTC: {health}, step {step}{behind}; {findings}", markup=False
    )
    out.print(llm_line(state.out.llm), markup=False)
    if state.out.llm is not None and state.out.llm.status != "off":
        out.print(f"LLM that day (UTC): {usage_text(day_usage(state.memory.llm_log, state.out.llm.at))}", markup=False)
    if state.out.launch is not None:
        launch = state.out.launch
        out.print(f"its decision: {launch.status.value} ({launch.note})", markup=False)
    for record in state.memory.dispatches[-3:]:
        verified = {True: "verified", False: "not verified", None: "unverified"}[record.verified]
        out.print(f"sent: {record.action.value} at {record.sent_at:%Y-%m-%d %H:%M} UTC ({verified})", markup=False)
    fleet_status.print_run_alerts(settings.home, monitor.run.run_dir)
    if request is None:
        out.print("nothing pending")
        return
    left = (request.expires_at - datetime.now(UTC)).total_seconds()
    out.print()
    out.print(render_request(request, monitor.run.run_dir), markup=False)
    out.print()
    if left <= 0:
        out.print("this decision has expired; the next check-in or `rlagent approve` closes it (nothing sent)")
    else:
        out.print(f"{pending_hint(request, monitor.run.run_dir)} ({left / 60:.0f} min left)", markup=False)
