"""`rlagent doctor RUN_DIR`: before anything goes wrong, check what a check-in and a restart of
the run would need, and say what is missing and how to fix it. Nothing is sent, written or
checked in; the exit status is 1 when something a restart needs is missing.

Checked: the run and its layout; write access to STATUS.md and to the state home; tmux, its
server, the session and its `Launcher` window (idle?); the launch command and where it comes
from (the same sources, in the same order, as a real restart); a complete checkpoint; the
Anthropic key and model when the LLM is on; SLURM's tools when the run is a SLURM job.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import typer

from rlagent.commands.common import (
    ConfigOpt,
    HomeOpt,
    LaunchOpt,
    LlmOpt,
    RunDir,
    SessionOpt,
    SocketOpt,
    fail,
    settings_from,
)
from rlagent.commands.console import out

STYLE = {"ok": "bold green", "warn": "bold yellow", "missing": "bold red"}


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    """ok, warn (works, but worth knowing) or missing (a restart, or a check-in, would fail)."""
    detail: str
    fix: str = ""


def doctor(
    run_dir: RunDir,
    config: ConfigOpt = None,
    home: HomeOpt = None,
    session: SessionOpt = None,
    tmux_socket: SocketOpt = None,
    launch_command: LaunchOpt = None,
    llm: LlmOpt = None,
) -> None:
    """Check what a restart of the run would need (tmux, launch command, checkpoint...) and say what is missing."""
    from rlagent.commands.common import find_run
    from rlagent.tools.layout import RunNotFound

    settings = settings_from(
        config,
        home=home,
        session=session,
        tmux_socket=tmux_socket,
        launch_command=launch_command,
        llm={"mode": llm.value} if llm else None,
    )
    try:
        run = find_run(run_dir)  # of any framework rlagent reads, as `check` finds it
    except RunNotFound as exc:
        fail(str(exc))
    kind = f"prime-rl layout {run.layout.value}" if run.layout is not None else run.framework.value
    checks = [
        Check("run", "ok", f"{run.run_dir} ({kind})"),
        _status_file(Path(run.run_dir)),
        _state_home(settings.home),
        *_tmux(settings),
        _launch_command(run, settings),
        _checkpoint(run),
        _llm(settings),
        _slurm(Path(run.run_dir)),
    ]
    for check in checks:
        if check is None:
            continue
        out.print(f"[{STYLE[check.status]}]{check.status:>7}[/]  [bold]{check.name}[/]: {_esc(check.detail)}", markup=True)
        if check.fix and check.status != "ok":
            out.print(f"           fix: {_esc(check.fix)}", markup=True)
    missing = [c.name for c in checks if c is not None and c.status == "missing"]
    out.print()
    if missing:
        out.print(f"[bold red]missing:[/] {', '.join(missing)} (see the fixes above)", markup=True)
        raise typer.Exit(1)
    out.print("[bold green]ready:[/] a check-in can write its entry and an approved restart can be sent", markup=True)


def _esc(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _writable_dir(path: Path) -> Path | None:
    """The nearest existing folder of `path` if this user may create files there, else None."""
    folder = path
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder if folder.is_dir() and os.access(folder, os.W_OK | os.X_OK) else None


def _status_file(run_dir: Path) -> Check:
    status = run_dir / "STATUS.md"
    if status.exists() and not status.is_file():
        return Check("STATUS.md", "missing", f"{status} is not a file", f"move it away: mv {status} {status}.old")
    if status.exists():
        ok = os.access(status, os.W_OK)
        return Check(
            "STATUS.md",
            "ok" if ok else "missing",
            f"{status} {'is writable' if ok else 'is read-only for you'}",
            f"chmod u+w {status}, or watch with --no-write",
        )
    ok = _writable_dir(run_dir) == run_dir
    return Check(
        "STATUS.md",
        "ok" if ok else "missing",
        f"{status} {'can be created' if ok else 'cannot be created'}",
        f"give yourself write access to {run_dir}, or watch with --no-write",
    )


def _state_home(home: Path) -> Check:
    folder = _writable_dir(home)
    if folder is None:
        return Check(
            "state home",
            "missing",
            f"{home} cannot be created or written",
            "pass --home DIR (or RLAGENT_HOME) pointing to a folder you can write",
        )
    return Check("state home", "ok", f"{home}" + ("" if home.exists() else " (created at the first check-in)"))


def _tmux(settings) -> list[Check]:
    from rlagent.models.actions import TmuxTarget
    from rlagent.tools.tmux import TmuxError, open_launcher

    if shutil.which("tmux") is None:
        return [Check("tmux", "missing", "tmux is not installed", "sudo apt-get install tmux (macOS: brew install tmux)")]
    target = TmuxTarget(socket=settings.tmux_socket, session=settings.session)
    try:
        pane = open_launcher(target)
        busy = pane.busy_with()
    except TmuxError as exc:
        return [
            Check(
                "tmux Launcher",
                "missing",
                str(exc),
                f"start the run in tmux: tmux{f' -L {target.socket}' if target.socket else ''} new -s {target.session} "
                f"-n Launcher (or pass --session / --tmux-socket)",
            )
        ]
    if busy:
        return [Check("tmux Launcher", "ok", f"{target.describe()} is running `{busy}` (a restart waits for its prompt)")]
    return [Check("tmux Launcher", "ok", f"{target.describe()} is at a shell prompt")]


def _launch_command(run, settings) -> Check:
    from rlagent.agents.command_plan import PlanDeps, find_launch_command
    from rlagent.models.actions import TmuxTarget
    from rlagent.models.observation import LiveProbes, Observation
    from rlagent.models.state import CheckinOutput, CheckinState
    from rlagent.tools.processes import find_run_processes

    processes, _ = find_run_processes(Path(run.run_dir), run.name)
    observation = Observation(now=datetime.now(UTC), offline=False, live=LiveProbes(processes=processes))
    state = CheckinState(run=run, checkin=0, out=CheckinOutput(observation=observation))
    deps = PlanDeps(
        target=TmuxTarget(socket=settings.tmux_socket, session=settings.session), launch_command=settings.launch_command
    )
    found, tried = find_launch_command(state, deps)
    if found is None:
        return Check(
            "launch command",
            "missing",
            "not found (" + "; ".join(tried) + ")",
            "pass --launch-command '...' (or set launch_command in the config); rlagent never guesses it",
        )
    return Check("launch command", "ok", f"`{' '.join(found.argv)}` from {found.detail}")


def _checkpoint(run) -> Check:
    from rlagent.models.run import Framework
    from rlagent.tools.adapters import adapter_for
    from rlagent.tools.checkpoints import checkpoint_parts, newest_complete

    if run.framework is not Framework.PRIME_RL:  # verl, TRL, OpenRLHF: their adapter knows their checkpoints
        newest = adapter_for(run.framework).newest_checkpoint(Path(run.run_dir))
        if newest is None:
            return Check("checkpoint", "missing", "no complete one", "a restart resumes from a complete checkpoint: save some")
        return Check("checkpoint", "ok", f"newest complete at step {newest}")
    parts = checkpoint_parts(Path(run.run_dir), run.layout, newest=10**6)
    newest = newest_complete(parts)
    if newest is None:
        detail = "none with both trainer and orchestrator state" + (f" (partial: steps {sorted(parts)[-3:]})" if parts else "")
        return Check("checkpoint", "missing", detail, "a restart resumes from a complete checkpoint: set a checkpoint interval")
    return Check("checkpoint", "ok", f"newest complete at step {newest}")


def _llm(settings) -> Check | None:
    mode = settings.llm.mode
    if mode == "off":
        return Check("LLM", "ok", "off (--llm off): the rules alone")
    key = bool(os.environ.get("ANTHROPIC_API_KEY"))
    if key:
        return Check("LLM", "ok", f"Claude ({settings.llm.model}) with ANTHROPIC_API_KEY")
    if mode == "claude":
        return Check(
            "LLM", "missing", "--llm claude but ANTHROPIC_API_KEY is not set", "export ANTHROPIC_API_KEY=... or --llm off"
        )
    return Check("LLM", "ok", "rules only (no ANTHROPIC_API_KEY; --llm auto)")


def _slurm(run_dir: Path) -> Check | None:
    jobs = sorted(p.name for p in run_dir.glob("job_*.log"))
    if not jobs:
        return None
    absent = [tool for tool in ("squeue", "scontrol", "sacct") if shutil.which(tool) is None]
    if absent:
        return Check(
            "SLURM",
            "warn",
            f"the run is a SLURM job ({jobs[-1]}) but {', '.join(absent)} not on PATH",
            "run rlagent on a SLURM login node, or put SLURM's tools on PATH",
        )
    return Check("SLURM", "ok", f"job logs {', '.join(jobs[-2:])}; squeue, scontrol and sacct found")
