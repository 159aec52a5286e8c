"""Command line: builds settings and the monitor, calls the library, prints. Nothing else.

Heavy libraries (LangGraph, the SQLite checkpointer) load inside the commands that need them,
so `--help` and errors are instant. User errors are one line on stderr and exit status 2.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from loguru import logger
from rich.console import Console

from rlagent.config import ConfigError, Settings, load_settings
from rlagent.tools.layout import RunNotFound, discover_run

app = typer.Typer(
    help="rlagent watches a prime-rl RL training run: it reads configs, logs, metrics and rollouts, "
    "diagnoses what is wrong, and appends a dated entry to the run's STATUS.md.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

HEALTH_STYLE = {"Healthy": "bold green", "Degraded": "bold yellow", "Down": "bold red"}

RunDir = Annotated[Path, typer.Argument(help="A prime-rl run directory (either layout), or an output dir holding runs.")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="TOML settings file (keys as in `rlagent.config.Settings`).")]
HomeOpt = Annotated[Path | None, typer.Option("--home", help="Where run state is kept [env RLAGENT_HOME].")]
TzOpt = Annotated[str | None, typer.Option("--log-timezone", help="IANA zone of the run's log times (default: local).")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Log timings and details to stderr.")]


def _fail(message: str) -> None:
    err.print(f"[bold red]rlagent: error:[/] {message}", markup=True)
    raise typer.Exit(2)


def _setup_logging(verbose: bool) -> None:
    logger.remove()
    logger.enable("rlagent")
    logger.add(sys.stderr, level="DEBUG" if verbose else "WARNING", format="<dim>{time:HH:mm:ss}</dim> {level} {message}")


def _settings(config: Path | None, **flags: object) -> Settings:
    try:
        return load_settings(config, **flags)
    except ConfigError as exc:
        _fail(str(exc))
        raise AssertionError from exc  # unreachable


def _monitor(run_dir: Path, settings: Settings):
    from rlagent.graph.runner import Monitor

    try:
        run = discover_run(run_dir)
    except RunNotFound as exc:
        _fail(str(exc))
    try:
        return Monitor(
            run,
            home=settings.home,
            offline=settings.offline,
            write=settings.write,
            thresholds=settings.thresholds,
            log_timezone=settings.log_timezone,
            probe_timeout_s=settings.probe_timeout_s,
        )
    except OSError as exc:
        _fail(f"state store under {settings.home}: {exc.strerror or exc}")


def summary_line(report: dict) -> str:
    health = report["health"] or "n/a"
    style = HEALTH_STYLE.get(health, "bold")
    step = report["step"] if report["step"] is not None else "n/a"
    total = report["max_steps"] if report["max_steps"] is not None else "n/a"
    when = report["checked_at"].replace("T", " ")[:16]
    parts = [f"[bold]{when} UTC[/] check-in #{report['checkin']}", f"[{style}]{health}[/]", f"step {step}/{total}"]
    findings = [f for f in report["findings"] if f["severity"] != "info"] or report["findings"]
    if findings:
        top = ", ".join(f"{f['id']} ({f['severity']})" for f in findings[:4])
        parts.append(f"{len(report['findings'])} finding(s): {top}")
    else:
        parts.append("no findings")
    return " · ".join(parts)


@app.command()
def check(
    run_dir: RunDir,
    offline: Annotated[bool, typer.Option("--offline", help="A recorded run: no process, tmux, HTTP or SLURM probes.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the check-in report as JSON on stdout, nothing else.")] = False,
    no_write: Annotated[bool, typer.Option("--no-write", help="Leave STATUS.md untouched.")] = False,
    config: ConfigOpt = None,
    home: HomeOpt = None,
    log_timezone: TzOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """One check-in now: diagnose the run and append an entry to its STATUS.md."""
    _setup_logging(verbose)
    settings = _settings(config, offline=offline or None, write=False if no_write else None, home=home, log_timezone=log_timezone)
    from rlagent.graph.runner import build_report

    monitor = _monitor(run_dir, settings)
    try:
        report = build_report(monitor.check_in())
    finally:
        monitor.close()
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return
    out.print(summary_line(report))
    if report["picked_from"]:
        out.print(f"(newest run in {report['picked_from']}: {report['run_dir']})")
    out.print()
    out.print(report["status_entry"], markup=False)


@app.command()
def run(
    run_dir: RunDir,
    cadence: Annotated[str | None, typer.Option("--cadence", help="Time between check-ins: 30s, 10m, 1h, 1h30m.")] = None,
    max_checks: Annotated[int | None, typer.Option("--max-checks", help="Stop after N check-ins.", min=1)] = None,
    offline: Annotated[bool, typer.Option("--offline", help="A recorded run: no live probes.")] = False,
    no_write: Annotated[bool, typer.Option("--no-write", help="Leave STATUS.md untouched.")] = False,
    config: ConfigOpt = None,
    home: HomeOpt = None,
    log_timezone: TzOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Check in at once, then once per cadence, until Ctrl-C (or --max-checks)."""
    _setup_logging(verbose)
    settings = _settings(
        config,
        cadence=cadence,
        max_checks=max_checks,
        offline=offline or None,
        write=False if no_write else None,
        home=home,
        log_timezone=log_timezone,
    )
    from rlagent.graph.runner import build_report

    monitor = _monitor(run_dir, settings)
    interval = settings.cadence_seconds
    out.print(f"watching {monitor.run.run_dir} every {settings.cadence} (Ctrl-C to stop)")
    done = 0
    started = time.monotonic()
    try:
        while True:
            report = build_report(monitor.check_in())
            out.print(summary_line(report))
            done += 1
            if settings.max_checks is not None and done >= settings.max_checks:
                break
            next_at = started + done * interval
            time.sleep(max(0.0, next_at - time.monotonic()))
    except KeyboardInterrupt:
        out.print("stopped (Ctrl-C); STATUS.md holds only complete entries")
        raise typer.Exit(130) from None
    finally:
        monitor.close()


# Further commands live in rlagent/commands/, one module each, registered here.


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("stopped (Ctrl-C)")
        sys.exit(130)
