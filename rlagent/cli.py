"""Command line: builds settings and the monitor, calls the library, prints. Nothing else.

Heavy libraries (LangGraph, the SQLite checkpointer) load inside the commands that need them,
so `--help` and errors are instant. User errors are one line on stderr and exit status 2.
"""

from __future__ import annotations

import json
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from loguru import logger
from rich.console import Console

from rlagent.config import ConfigError, Settings, load_settings
from rlagent.graph.store import RunLocked, StoreError
from rlagent.models.actions import ApprovalMode
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
ApproveOpt = Annotated[
    ApprovalMode | None,
    typer.Option(
        "--approve",
        help="ask: offer an agreed restart/stop for your approval (prompt in a terminal, else pending for "
        "`rlagent approve`); never: observe only (default: ask).",
    ),
]
SessionOpt = Annotated[str | None, typer.Option("--session", help="tmux session of the run (default: prime-rl).")]
SocketOpt = Annotated[str | None, typer.Option("--tmux-socket", help="tmux server socket name (tmux -L NAME).")]
LaunchOpt = Annotated[
    str | None, typer.Option("--launch-command", help="The run's own launch command, when rlagent cannot find it.")
]


class LLMMode(StrEnum):
    AUTO = "auto"
    CLAUDE = "claude"
    OFF = "off"


LlmOpt = Annotated[
    LLMMode | None,
    typer.Option(
        "--llm", help="auto: Claude when ANTHROPIC_API_KEY is set; claude: Claude; off: the rules alone. [default: auto]"
    ),
]


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


def _watch_settings(
    config, offline, no_write, home, log_timezone, approve, session, tmux_socket, launch_command, llm, **more
) -> Settings:
    """Settings of `check` and `run` from their shared flags (a flag not given overrides nothing)."""
    return _settings(
        config,
        offline=offline or None,
        write=False if no_write else None,
        home=home,
        log_timezone=log_timezone,
        approve=approve,
        session=session,
        tmux_socket=tmux_socket,
        launch_command=launch_command,
        llm={"mode": llm.value} if llm else None,
        **more,
    )


def _llm(settings: Settings):
    """The LLM runtime of this process (Claude on or off, and why); the SDK loads only on first use."""
    from rlagent.agents.llm.runtime import LLMRuntime

    runtime = LLMRuntime.from_settings(settings.llm)
    if settings.llm.mode == "claude" and not runtime.enabled:
        err.print(f"rlagent: warning: {runtime.choice.reason}; checking with the rules alone", markup=False)
    return runtime


def _monitor(run_dir: Path, settings: Settings, actions=None):
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
            actions=actions,
            llm=_llm(settings),
            lock_timeout_s=settings.seconds("lock_timeout"),
        )
    except OSError as exc:
        _fail(f"state store under {settings.home}: {exc.strerror or exc}")
    except StoreError as exc:
        _fail(str(exc))


def say_write_outcome(report: dict) -> bool:
    """An entry that was not appended is never silent: one line on stderr. True on a failure."""
    if report.get("write_error"):
        err.print(f"rlagent: error: check-in #{report['checkin']}: {report['write_error']}", markup=False)
        return True
    if report.get("write_note"):
        err.print(f"rlagent: note: {report['write_note']}", markup=False)
    return False


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
    approve: ApproveOpt = None,
    session: SessionOpt = None,
    tmux_socket: SocketOpt = None,
    launch_command: LaunchOpt = None,
    llm: LlmOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """One check-in now: diagnose the run and append an entry to its STATUS.md."""
    _setup_logging(verbose)
    settings = _watch_settings(config, offline, no_write, home, log_timezone, approve, session, tmux_socket, launch_command, llm)
    from rlagent.commands.approve import action_config, offer
    from rlagent.graph.runner import DecisionPending, build_report
    from rlagent.tools.approval import interactive

    monitor = _monitor(run_dir, settings, actions=action_config(settings))
    ask = interactive() and not as_json and settings.approve is ApprovalMode.ASK
    try:
        try:
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
        failed = say_write_outcome(report)
        if as_json:
            sys.stdout.write(json.dumps(report, indent=2) + "\n")
            if failed:
                raise typer.Exit(1)
            return
        out.print(summary_line(report))
        if report["picked_from"]:
            out.print(f"(newest run in {report['picked_from']}: {report['run_dir']})")
        out.print()
        out.print(report["status_entry"], markup=False)
        if found:
            offer(monitor, timeout_s=settings.seconds("approval_timeout"), interactive=ask, where="rlagent check")
        if failed:
            raise typer.Exit(1)
    finally:
        monitor.close()


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
    approve: ApproveOpt = None,
    session: SessionOpt = None,
    tmux_socket: SocketOpt = None,
    launch_command: LaunchOpt = None,
    llm: LlmOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Check in at once, then once per cadence, until Ctrl-C (or --max-checks)."""
    _setup_logging(verbose)
    settings = _watch_settings(
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
    from rlagent.commands.approve import action_config, offer
    from rlagent.graph.runner import DecisionPending, build_report
    from rlagent.tools.approval import interactive

    monitor = _monitor(run_dir, settings, actions=action_config(settings))
    ask = interactive() and settings.approve is ApprovalMode.ASK
    interval = settings.cadence_seconds
    out.print(f"watching {monitor.run.run_dir} every {settings.cadence} (Ctrl-C to stop)")
    done = 0
    failed = False
    started = time.monotonic()
    try:
        while True:
            fresh = True
            try:
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
            done += 1
            if settings.max_checks is not None and done >= settings.max_checks:
                if failed:  # the last check-in could not be written (or made): not a success
                    raise typer.Exit(1)
                break
            next_at = started + done * interval
            time.sleep(max(0.0, next_at - time.monotonic()))
    except KeyboardInterrupt:
        out.print("stopped (Ctrl-C); STATUS.md holds only complete entries")
        raise typer.Exit(130) from None
    finally:
        monitor.close()


# Further commands live in rlagent/commands/, one module each, registered here.
from rlagent.commands.evaluate import evaluate as _evaluate  # noqa: E402
from rlagent.commands.replay import replay as _replay  # noqa: E402

app.command(name="replay")(_replay)
app.command(name="eval")(_evaluate)
from rlagent.commands.approve import approve as _approve  # noqa: E402
from rlagent.commands.demo import demo as _demo  # noqa: E402
from rlagent.commands.status import status as _status  # noqa: E402

app.command(name="approve")(_approve)
app.command(name="status")(_status)
app.command(name="demo")(_demo)
from rlagent.commands.simulate import simulate as _simulate  # noqa: E402

app.command(name="simulate")(_simulate)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("stopped (Ctrl-C)")
        sys.exit(130)
    except (StoreError, RunLocked) as exc:  # from any command: one line, never a traceback
        err.print(f"rlagent: error: {exc}", markup=False)
        sys.exit(2)
