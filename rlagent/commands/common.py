"""What the commands share (the consoles and the one-line error are console.py's): logging,
settings, finding the run, the monitor and its LLM runtime, the options of `check` and `run`, and
the one-line summary of a check-in. Imported by the commands; `rlagent.cli` only registers them
(and imports nothing back from them but the command functions)."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from loguru import logger

from rlagent.commands.console import err, fail
from rlagent.config import ConfigError, Settings, load_settings
from rlagent.graph.store import StoreError
from rlagent.models.actions import ApprovalMode
from rlagent.tools.layout import RunNotFound, discover_run

HEALTH_STYLE = {"Healthy": "bold green", "Degraded": "bold yellow", "Down": "bold red"}

RunDir = Annotated[
    Path,
    typer.Argument(help="A run directory of prime-rl (either layout, or an output dir holding runs), verl, TRL or OpenRLHF."),
]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="TOML settings file (keys as in `rlagent.config.Settings`).")]
HomeOpt = Annotated[
    Path | None, typer.Option("--home", help="Where run state is kept (env RLAGENT_HOME; default ~/.local/state/rlagent).")
]
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
        "--llm", help="auto: Claude when ANTHROPIC_API_KEY is set; claude: Claude; off: the rules alone (default: auto)."
    ),
]


def setup_logging(verbose: bool) -> None:
    from rlagent.tools.untrusted import strip_controls

    logger.remove()
    logger.enable("rlagent")
    # A message may carry a path or an exception's text: like the consoles, stderr gets no control sequence.
    logger.configure(patcher=lambda record: record.update(message=strip_controls(record["message"])))
    logger.add(sys.stderr, level="DEBUG" if verbose else "WARNING", format="<dim>{time:HH:mm:ss}</dim> {level} {message}")


def settings_from(config: Path | None, **flags: object) -> Settings:
    try:
        return load_settings(config, **flags)
    except ConfigError as exc:
        fail(str(exc))


def watch_settings(
    config, offline, no_write, home, log_timezone, approve, session, tmux_socket, launch_command, llm, **more
) -> Settings:
    """Settings of `check` and `run` from their shared flags (a flag not given overrides nothing)."""
    return settings_from(
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


def llm_runtime(settings: Settings):
    """The LLM runtime of this process (Claude on or off, and why); the SDK loads only on first use."""
    from rlagent.agents.llm.runtime import LLMRuntime

    runtime = LLMRuntime.from_settings(settings.llm)
    if settings.llm.mode == "claude" and not runtime.enabled:
        err.print(f"rlagent: warning: {runtime.choice.reason}; checking with the rules alone", markup=False)
    return runtime


FrameworkOpt = Annotated[
    str | None,
    typer.Option("--framework", help="prime-rl, verl, trl or openrlhf (default: detected from the run directory)."),
]


def find_run(run_dir: Path, framework: str | None = None):
    """The run at `run_dir`: of `framework` when given, else of the framework its files show."""
    from rlagent.tools.adapters import NoFramework, discover

    if framework is not None and framework not in ("prime-rl", "verl", "trl", "openrlhf"):
        fail(f"--framework must be prime-rl, verl, trl or openrlhf, not {framework!r}")
    if framework is not None:
        _say_if_forced_against_the_files(Path(run_dir), framework)
    if framework == "prime-rl":
        return discover_run(run_dir)
    try:
        found = discover(run_dir, framework)
    except NoFramework:
        return discover_run(run_dir)  # prime-rl's own message says what is missing
    return found if framework is not None else newest_of_several(Path(run_dir), found)


def _say_if_forced_against_the_files(path: Path, framework: str) -> None:
    """--framework is obeyed, but a run read as another framework's than its files show would
    check in Healthy with no step: the person is told which one the files show."""
    from rlagent.tools.adapters import NoFramework, discover
    from rlagent.tools.layout import RunNotFound

    try:
        shown = discover(path).framework.value
    except (NoFramework, RunNotFound, OSError):
        return
    if shown != framework:
        err.print(f"rlagent: note: {path} looks like a {shown} run; read as {framework}, as --framework asks", markup=False)


def newest_of_several(path: Path, found):
    """A folder of several verl, TRL or OpenRLHF runs is not one run: read as one, their logs would
    be merged. As for a prime-rl output dir, the newest of them is the run (`picked_from` says so),
    the runs being those `rlagent watch` finds there."""
    from rlagent.models.run import Framework
    from rlagent.tools.adapters import run_here

    if found.framework is Framework.PRIME_RL or found.picked_from is not None or run_here(path) is not None:
        return found
    from rlagent.graph.fleetview import activity_time, find_runs

    runs, _ = find_runs([path], max_depth=2)
    if len(runs) < 2:
        return found
    newest = max(runs, key=lambda run: activity_time(run.run_dir))
    return newest.model_copy(update={"picked_from": str(path)})


def effects_for(settings: Settings):
    """The real side effects, as the settings shape them (SLURM node probes over ssh or not)."""
    from rlagent.graph.runner import Effects
    from rlagent.tools.slurm_probe import SlurmSettings, SystemCluster

    return Effects(cluster=SystemCluster(SlurmSettings(ssh=settings.slurm_ssh)))


def monitor_options(settings: Settings) -> dict:
    """What every Monitor a command opens takes from the settings (`check`, `run`, `watch`)."""
    return {
        "home": settings.home,
        "offline": settings.offline,
        "write": settings.write,
        "thresholds": settings.thresholds,
        "log_timezone": settings.log_timezone,
        "probe_timeout_s": settings.probe_timeout_s,
        "effects": effects_for(settings),
        "lock_timeout_s": settings.seconds("lock_timeout"),
    }


def open_monitor(run_dir: Path, settings: Settings, actions=None, framework: str | None = None):
    """The monitor of the run at `run_dir` (a user error if there is no run or no state store)."""
    from rlagent.graph.runner import Monitor

    try:
        run = find_run(run_dir, framework)
    except RunNotFound as exc:
        fail(str(exc))
    try:
        return Monitor(run, actions=actions, llm=llm_runtime(settings), **monitor_options(settings))
    except OSError as exc:
        fail(f"state store under {settings.home}: {exc.strerror or exc}")
    except StoreError as exc:
        fail(str(exc))


def say_write_outcome(report: dict) -> bool:
    """An entry that was not appended is never silent: one line on stderr. True on a failure (the
    entry is kept and tried again at the next check-in)."""
    if report.get("write_error"):
        err.print(f"rlagent: error: check-in #{report['checkin']}: {report['write_error']}", markup=False)
        return True
    if report.get("write_note"):  # not appended, and not a failure (it is in STATUS.md already)
        err.print(f"rlagent: note: {report['write_note']}", markup=False)
    return False


def step_text(step: int | None, total: int | None) -> str:
    """`step 60/200`, `step 60` (no max known), `no step yet (of 200)`."""
    if step is None:
        return "no step yet" + (f" (of {total})" if total is not None else "")
    return f"step {step}/{total}" if total is not None else f"step {step}"


def where_written(report: dict, settings: Settings) -> str:
    """One line saying what became of STATUS.md."""
    status = Path(report["run_dir"]) / "STATUS.md"
    if not settings.write:
        return f"--no-write: {status} and the run's state left untouched"
    if report.get("write_error"):
        return f"not written: {report['write_error']}"
    if report["written"]:
        return f"appended to {status}"
    if settings.offline:
        return f"{status} unchanged: nothing new in the recorded run since the last check-in"
    return f"{status} unchanged: this check-in's entry was already there"


def write_failed(report: dict) -> None:
    """A STATUS.md that could not be written, or a run of which nothing could be read, is an
    error (stderr, exit status 1): never reported as a success."""
    if say_write_outcome(report):
        raise typer.Exit(1)
    unreadable = next((n for n in report.get("notes", []) if n.startswith("nothing could be read")), None)
    if unreadable:
        err.print(f"rlagent: error: {report['run_dir']}: {unreadable}", markup=False)
        raise typer.Exit(1)


def summary_line(report: dict) -> str:
    health = report["health"] or "n/a"
    style = HEALTH_STYLE.get(health, "bold")
    when = report["checked_at"].replace("T", " ")[:16]
    parts = [
        f"[bold]{when} UTC[/] check-in #{report['checkin']}",
        f"[{style}]{health}[/]",
        step_text(report["step"], report["max_steps"]) + (" (catching up)" if report.get("behind") else ""),
    ]
    findings = [f for f in report["findings"] if f["severity"] != "info"] or report["findings"]
    if findings:
        top = ", ".join(f"{f['id']} ({f['severity']})" for f in findings[:4])
        parts.append(f"{len(report['findings'])} finding(s): {top}")
    else:
        parts.append("no findings")
    return " · ".join(parts)
