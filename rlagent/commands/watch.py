"""`rlagent watch ROOT...`: every run under the roots in one process (graph/fleet.py does the work).

Takes the flags `run` takes; adds `--max-rounds`, `--notify URL` (repeatable), `--report PATH`,
`--workers`, `--max-depth`. Prints one line per check-in and per round; notes (a failed check-in,
an unreachable webhook, a vanished run) are one line each. Webhook URLs are never printed.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from rlagent.commands.console import out
from rlagent.tools import interrupts

STYLE = {"Healthy": "green", "Degraded": "yellow", "Down": "bold red"}


def _line(outcome) -> str:
    name = escape(outcome.run.name)
    if outcome.error:
        return f"  {name}: [bold red]check-in failed[/] ({escape(outcome.error)})"
    if outcome.pending:
        return f"  {name}: no check-in: {escape(outcome.pending)}"
    s = outcome.summary
    health = s.health or "n/a"
    step = f"{s.step if s.step is not None else 'n/a'}/{s.max_steps if s.max_steps is not None else 'n/a'}"
    parts = [f"  {name}: [{STYLE.get(health, 'bold')}]{health}[/] step {step} #{s.checkin}"]
    findings = [f for f in s.findings if f != "run_finished"]
    if findings:
        parts.append(escape(", ".join(findings[:5]) + (f" +{len(findings) - 5}" if len(findings) > 5 else "")))
    if outcome.retired:
        parts.append("finished: final entry written, retired")
    return " · ".join(parts) + f" ({outcome.seconds * 1000:.0f} ms)"


def _round_line(rep, fast: float) -> str:
    from rlagent.agents.fleet_report import duration

    healths = [o.summary.health for o in rep.outcomes if o.summary]
    counts = ", ".join(f"{healths.count(h)} {h}" for h in ("Healthy", "Degraded", "Down") if healths.count(h))
    failed = sum(1 for o in rep.outcomes if o.error)
    text = f"round {rep.number}: {len(rep.outcomes)} check-in(s) of {rep.runs} run(s) in {rep.seconds:.2f}s"
    if counts:
        text += f" ({counts})"
    if failed:
        text += f", {failed} failed"
    if rep.delivered or rep.failed_deliveries:
        text += f"; notifications: {rep.delivered} delivered, {rep.failed_deliveries} failed"
    if rep.report_seconds is not None:
        text += f"; report in {rep.report_seconds:.2f}s"
    if rep.next_in is not None:
        text += f"; next round in {duration(rep.next_in) if rep.next_in >= 60 else f'{rep.next_in:.0f}s'}"
    return text


def watch(
    roots: Annotated[list[Path], typer.Argument(help="Folders holding runs (any depth up to --max-depth), or runs.")],
    cadence: Annotated[
        str | None, typer.Option("--cadence", help="Time between check-ins of a Healthy run: 30s, 10m, 1h.")
    ] = None,
    max_rounds: Annotated[int | None, typer.Option("--max-rounds", help="Stop after N rounds.", min=1)] = None,
    notify: Annotated[
        list[str] | None,
        typer.Option("--notify", help="Webhook URL (repeatable): generic JSON, Slack or Discord. Also notify.urls in the TOML."),
    ] = None,
    report: Annotated[Path | None, typer.Option("--report", help="Rewrite this HTML report after every round.")] = None,
    workers: Annotated[int | None, typer.Option("--workers", help="Check-ins at once (default 8).", min=1, max=64)] = None,
    max_depth: Annotated[
        int | None, typer.Option("--max-depth", help="How deep under a root to look for runs (default 3).")
    ] = None,
    offline: Annotated[bool, typer.Option("--offline", help="Recorded runs: no live probes.")] = False,
    no_write: Annotated[bool, typer.Option("--no-write", help="Leave STATUS.md untouched.")] = False,
    config: Annotated[Path | None, typer.Option("--config", help="TOML settings file.")] = None,
    home: Annotated[Path | None, typer.Option("--home", help="Where run state is kept (env RLAGENT_HOME).")] = None,
    log_timezone: Annotated[str | None, typer.Option("--log-timezone", help="IANA zone of the runs' log times.")] = None,
    approve: Annotated[
        str | None, typer.Option("--approve", help="ask (decisions wait for `rlagent approve`) or never (observe only).")
    ] = None,
    session: Annotated[str | None, typer.Option("--session", help="tmux session of the runs (default: prime-rl).")] = None,
    tmux_socket: Annotated[str | None, typer.Option("--tmux-socket", help="tmux server socket name.")] = None,
    launch_command: Annotated[str | None, typer.Option("--launch-command", help="The runs' launch command.")] = None,
    llm: Annotated[str | None, typer.Option("--llm", help="auto, claude or off (default: auto).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log timings and details to stderr.")] = False,
) -> None:
    """Watch every run under the roots in one process: parallel check-ins, adaptive cadence,
    incidents and notifications, an HTML report; until Ctrl-C (or --max-rounds)."""
    from rlagent.commands import common
    from rlagent.models.actions import ApprovalMode
    from rlagent.tools.safefs import not_a_directory

    common.setup_logging(verbose)
    if approve is not None and approve not in ("ask", "never"):
        common.fail(f"--approve must be ask or never, not {approve!r}")
    if llm is not None and llm not in ("auto", "claude", "off"):
        common.fail(f"--llm must be auto, claude or off, not {llm!r}")
    watch_flags = {k: v for k, v in {"workers": workers, "max_depth": max_depth, "report": report}.items() if v is not None}
    settings = common.watch_settings(
        config,
        offline,
        no_write,
        home,
        log_timezone,
        ApprovalMode(approve) if approve else None,
        session,
        tmux_socket,
        launch_command,
        common.LLMMode(llm) if llm else None,
        cadence=cadence,
        watch=watch_flags or None,
        notify={"urls": notify} if notify else None,
    )
    from rlagent.commands.offer import action_config
    from rlagent.graph.adaptive import fast_cadence
    from rlagent.graph.fleet import Watcher
    from rlagent.graph.fleetview import not_replaceable
    from rlagent.graph.runner import Monitor
    from rlagent.tools.notify import parse_destinations

    try:
        destinations = parse_destinations(settings.notify.urls)
    except ValueError as exc:
        common.fail(str(exc))
    for root in roots:
        if problem := not_a_directory(root):
            common.fail(f"{root}: {problem}")
    report_path = settings.watch.report
    if report_path is not None and (report_path.is_dir() or not report_path.parent.is_dir()):
        # Said now, not as a note after every round of a watch that may run for days.
        what = "a directory: give a file, such as report.html in it" if report_path.is_dir() else "its folder does not exist"
        common.fail(f"--report {report_path}: {what}")
    if report_path is not None and (why := not_replaceable(report_path)) is not None:
        common.fail(f"--report {report_path}: {why}")
    actions = action_config(settings, notify=lambda line: None)
    common.llm_runtime(settings)  # says once why Claude is off when it was asked for
    from rlagent.agents.llm.runtime import LLMRuntime

    def make_monitor(run):
        # One LLM runtime per run: a runtime holds the session of the check-in it runs, and the
        # check-ins of different runs run at the same time.
        llm = LLMRuntime.from_settings(settings.llm)
        # A fleet's monitors read their history back (2 ms) rather than hold 2.9 MB each.
        options = common.monitor_options(settings)
        return Monitor(run, actions=actions, llm=llm, retire_finished=True, keep_history=False, **options)

    watcher = Watcher(
        roots,
        home=settings.home,
        cadence_s=settings.cadence_seconds,
        settings=settings.watch,
        notify=settings.notify,
        destinations=destinations,
        make_monitor=make_monitor,
    )
    fast = fast_cadence(settings.cadence_seconds, settings.watch)
    where = ", ".join(str(r) for r in roots)
    out.print(
        f"watching runs under {escape(where)}: every {settings.cadence} while Healthy, every {fast:.0f}s while "
        f"Degraded or Down; {settings.watch.workers} at once"
        + (f"; notifying {len(destinations)} webhook(s)" if destinations else "")
        + " (Ctrl-C to stop)"
    )
    try:
        while True:
            rep = watcher.round()
            for name in rep.new:
                out.print(f"  + {escape(name)}")
            for outcome in rep.outcomes:
                out.print(_line(outcome))
            for note in rep.notes:
                out.print(f"  note: {escape(note)}")
            for name in rep.still_running:
                out.print(f"  still running: {escape(name)} (skipped until it returns)")
            out.print(_round_line(rep, fast))
            if max_rounds is not None and rep.number >= max_rounds:
                break
            interrupts.sleep(rep.next_in or fast)
    except KeyboardInterrupt:
        watcher.cancel_queued()
        running = watcher.in_flight()
        if running:
            out.print(f"stopping: letting {running} check-in(s) in progress finish (Ctrl-C again to leave at once)")
            with contextlib.suppress(KeyboardInterrupt):
                watcher.finish(120)
        out.print("stopped (Ctrl-C); STATUS.md holds only complete entries")
        raise typer.Exit(130) from None
    finally:
        try:
            last = watcher.flush(min(15.0, settings.notify.timeout_s * settings.notify.attempts + 2))
            for note in last.notes:
                out.print(f"  note: {escape(note)}")
            if last.still_running:
                out.print(f"{len(last.still_running)} notification(s) still being delivered: they stay queued for the next watch")
        except KeyboardInterrupt:
            pass
        watcher.close()
