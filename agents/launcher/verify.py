"""The verification after a send: did the run come back (restart) or stop (stop)?

Polled at the deps' pace until every check passes or the bounded time is up; a restart command
that exits early fails at once. Time and waiting go through the deps' clock, the process table
through the deps' probe, so the polling is tested without real processes or real waiting.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

from rlagent.agents.launcher.deps import LauncherDeps
from rlagent.models.actions import RESTARTS, ActionKind, Check, Verification
from rlagent.models.run import Framework, Layout
from rlagent.models.slurm import ACTIVE_STATES
from rlagent.models.state import CheckinState
from rlagent.tools.evidence import newest_step, process_logs
from rlagent.tools.layout import current_attempt
from rlagent.tools.safefs import read_up_to
from rlagent.tools.tmux import PaneLike, TmuxError


class Baseline(BaseModel):
    """The run as it was just before the send, to tell what changed after it."""

    attempt: str | None = None
    trainer_log: str | None = None
    trainer_offset: int = 0
    sent_at: datetime | None = None
    job_ids: list[str] = []
    """SLURM: the run's jobs before the send (a resubmission's job is one not among them)."""


def _framework_log(state: CheckinState) -> Path | None:
    """verl/TRL/OpenRLHF: the console log the relaunch appends to (the largest one)."""
    from rlagent.tools.adapters import adapter_for

    logs = adapter_for(state.run.framework).console_logs(Path(state.run.run_dir))
    return max(logs, key=lambda p: p.stat().st_size) if logs else None


def framework_step(state: CheckinState, path: Path, offset: int, resume_step: int) -> int | None:
    """Newest step of the lines a relaunch from `resume_step` appended to `path` after `offset`."""
    from rlagent.tools.adapters import adapter_for

    adapter = adapter_for(state.run.framework)
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = read_up_to(handle, 16 << 20)
    except OSError:
        return None
    read = adapter.read_text(data.decode("utf-8", errors="replace"), path.name, Path(state.run.run_dir), resume_step)
    steps = [row.step for row in read.rows]
    return max(steps) if steps else None


FRAMEWORK_ROLES = {Framework.VERL: ("TaskRunner",), Framework.TRL: ("launcher",), Framework.OPENRLHF: ("PPOTrainer",)}
"""The process a relaunch of each framework must bring back (its trainer loop)."""


def _label(state: CheckinState) -> str:
    return "PRIME-RL" if state.run.framework is Framework.PRIME_RL else state.run.framework.value


def take_baseline(state: CheckinState) -> Baseline:
    run_dir = Path(state.run.run_dir)
    if state.run.framework is not Framework.PRIME_RL:
        log = _framework_log(state)
        return Baseline(trainer_log=str(log.relative_to(run_dir)), trainer_offset=log.stat().st_size) if log else Baseline()
    if state.run.layout is Layout.H:
        return Baseline(attempt=current_attempt(run_dir))
    logs = process_logs(run_dir, state.run.layout, "trainer")
    if not logs:
        return Baseline()
    return Baseline(trainer_log=str(logs[0].relative_to(run_dir)), trainer_offset=logs[0].stat().st_size)


def verify(
    state: CheckinState, action: ActionKind, baseline: Baseline, resume_step: int, deps: LauncherDeps, pane: PaneLike | None,
    job_id: str | None = None,
) -> tuple[Verification, str]:  # fmt: skip
    """(the verification, its one-line note) for a sent restart or stop."""
    if action is ActionKind.RESUBMIT:
        verification = verify_resubmit(state, baseline, resume_step, deps)
        failed = "; ".join(c.detail for c in verification.checks if not c.ok)
        return verification, "resubmission verified" if verification.ok else "resubmission failed: " + failed
    if action is ActionKind.STOP and job_id:
        verification = verify_scancel(state, job_id, deps, pane)
        failed = "; ".join(c.detail for c in verification.checks if not c.ok)
        return verification, "scancel verified" if verification.ok else "scancel not confirmed: " + failed
    if action in RESTARTS:
        verification = verify_restart(state, baseline, resume_step, deps, pane)
        failed = "; ".join(c.detail for c in verification.checks if not c.ok)
        return verification, "restart verified" if verification.ok else "restart failed: " + failed
    verification = verify_stop(state, deps, pane)
    failed = "; ".join(c.detail for c in verification.checks if not c.ok)
    return verification, "stop verified" if verification.ok else "stop not confirmed: " + failed


def _roles(state: CheckinState, deps: LauncherDeps) -> tuple[list[str], str]:
    run = state.run
    if run.framework is Framework.PRIME_RL:
        found, how = deps.processes.run_processes(Path(run.run_dir), run.name)
    else:
        from rlagent.tools.adapters import adapter_for

        markers = adapter_for(run.framework).process_markers(run)
        found, how = deps.processes.run_processes(Path(run.run_dir), run.name, framework=run.framework.value, markers=markers)
    return sorted({p.role for p in found}), how


def restart_checks(
    state: CheckinState, baseline: Baseline, resume_step: int, deps: LauncherDeps
) -> tuple[list[Check], int | None, str | None]:
    run_dir, layout = Path(state.run.run_dir), state.run.layout
    roles, how = _roles(state, deps)
    required = deps.required_roles if state.run.framework is Framework.PRIME_RL else FRAMEWORK_ROLES[state.run.framework]
    missing = [r for r in required if r not in roles]
    checks = [
        Check(
            name="processes_back",
            ok=not missing,
            detail=f"{_label(state)} {', '.join(roles) or 'none'} alive"
            if not missing
            else f"no {', '.join(missing)} process yet ({how})",
        )
    ]
    step: int | None = None
    attempt: str | None = None
    if state.run.framework is not Framework.PRIME_RL:
        log = _framework_log(state)
        path = run_dir / baseline.trainer_log if baseline.trainer_log else log
        size = path.stat().st_size if path is not None and path.exists() else 0
        fresh = path is not None and size > baseline.trainer_offset
        name = path.name if path is not None else "the console log"
        checks.append(Check(name="fresh_lines", ok=fresh, detail=f"{name} grew" if fresh else f"no new line in {name}"))
        if fresh and path is not None:
            step = framework_step(state, path, baseline.trainer_offset, resume_step)
    elif layout is Layout.H:
        attempt = current_attempt(run_dir)
        fresh = attempt is not None and attempt != baseline.attempt
        checks.append(Check(name="new_attempt", ok=fresh, detail=f"new logs/{attempt}" if fresh else f"still logs/{attempt}"))
        if fresh:
            logs = process_logs(run_dir, layout, "trainer")
            step = newest_step(logs[0], "trainer") if logs else None
    else:
        path = run_dir / (baseline.trainer_log or "logs/trainer.log")
        size = path.stat().st_size if path.exists() else 0
        fresh = size > baseline.trainer_offset
        checks.append(Check(name="fresh_lines", ok=fresh, detail=f"{path.name} grew" if fresh else f"no new line in {path.name}"))
        if fresh:
            step = newest_step(path, "trainer", baseline.trainer_offset)
    advanced = step is not None and step > resume_step
    checks.append(
        Check(
            name="step_advancing",
            ok=advanced,
            detail=f"trainer at step {step}, past resume step {resume_step}"
            if advanced
            else f"no trainer step past {resume_step} yet",
        )
    )
    return checks, step, attempt


def verify_restart(
    state: CheckinState, baseline: Baseline, resume_step: int, deps: LauncherDeps, pane: PaneLike | None
) -> Verification:
    """Poll until the run is back (processes, new attempt or fresh lines, step past the resume
    step) or the bounded time is up; a command that exits early fails at once."""
    started = deps.clock.monotonic()
    seen_busy = False
    while True:
        checks, step, attempt = restart_checks(state, baseline, resume_step, deps)
        waited = deps.clock.monotonic() - started
        if all(c.ok for c in checks):
            return Verification(ok=True, checks=checks, step=step, attempt=attempt, waited_s=round(waited, 1))
        busy = _busy(pane)
        seen_busy = seen_busy or bool(busy)
        if seen_busy and busy is None:
            tail = [line for line in _tail(pane) if line.strip()][-3:]
            exited = Check(
                name="command_running", ok=False, detail="the command exited; the pane's last lines: " + " | ".join(tail)
            )
            return Verification(ok=False, checks=[*checks, exited], step=step, attempt=attempt, waited_s=round(waited, 1))
        if waited >= deps.verify_timeout_s:
            timeout = Check(name="in_time", ok=False, detail=f"not back within {deps.verify_timeout_s:.0f} s")
            return Verification(ok=False, checks=[*checks, timeout], step=step, attempt=attempt, waited_s=round(waited, 1))
        deps.clock.sleep(deps.verify_poll_s)


def _jobs(state: CheckinState, deps: LauncherDeps) -> dict[str, str]:
    cluster = deps.cluster.probe(Path(state.run.run_dir))
    return cluster.states() if cluster is not None else {}


def verify_resubmit(state: CheckinState, baseline: Baseline, resume_step: int, deps: LauncherDeps) -> Verification:
    """Poll until a new SLURM job of the run is RUNNING, then a new attempt (H) or fresh trainer
    lines (L) and the step past the resume step; bounded by the verification timeout."""
    started = deps.clock.monotonic()
    while True:
        jobs = _jobs(state, deps)
        new = {j: s for j, s in jobs.items() if j not in baseline.job_ids}
        running = sorted(j for j, s in new.items() if s == "RUNNING")
        seen = ", ".join(f"{j} {s}" for j, s in sorted(new.items())) or "none"
        job_check = Check(
            name="new_job_running",
            ok=bool(running),
            detail=f"new SLURM job {running[-1]} RUNNING" if running else f"no new SLURM job running yet (new jobs: {seen})",
        )
        checks, step, attempt = restart_checks(state, baseline, resume_step, deps)
        checks = [job_check, *(c for c in checks if c.name != "processes_back")]  # the processes run on the job's nodes
        waited = deps.clock.monotonic() - started
        ended = sorted(j for j, s in new.items() if s not in ACTIVE_STATES)
        if all(c.ok for c in checks):
            return Verification(ok=True, checks=checks, step=step, attempt=attempt, waited_s=round(waited, 1))
        if ended and not running and not any(s in ACTIVE_STATES for s in new.values()):
            gone = Check(name="job_alive", ok=False, detail=f"the new job ended: {', '.join(f'{j} {new[j]}' for j in ended)}")
            return Verification(ok=False, checks=[*checks, gone], step=step, attempt=attempt, waited_s=round(waited, 1))
        if waited >= deps.verify_timeout_s:
            timeout = Check(name="in_time", ok=False, detail=f"not back within {deps.verify_timeout_s:.0f} s")
            return Verification(ok=False, checks=[*checks, timeout], step=step, attempt=attempt, waited_s=round(waited, 1))
        deps.clock.sleep(deps.verify_poll_s)


def verify_scancel(state: CheckinState, job_id: str, deps: LauncherDeps, pane: PaneLike | None) -> Verification:
    started = deps.clock.monotonic()
    while True:
        job_state = _jobs(state, deps).get(job_id, "gone")
        checks = [
            Check(
                name="job_ended",
                ok=job_state not in ACTIVE_STATES,
                detail=f"SLURM job {job_id} is {job_state}",
            )
        ]
        waited = deps.clock.monotonic() - started
        if all(c.ok for c in checks) or waited >= deps.verify_timeout_s:
            return Verification(ok=all(c.ok for c in checks), checks=checks, waited_s=round(waited, 1))
        deps.clock.sleep(deps.verify_poll_s)


def verify_stop(state: CheckinState, deps: LauncherDeps, pane: PaneLike | None) -> Verification:
    started = deps.clock.monotonic()
    while True:
        roles, _ = _roles(state, deps)
        busy = _busy(pane)
        checks = [
            Check(
                name="processes_gone",
                ok=not roles,
                detail="no PRIME-RL process left" if not roles else f"{', '.join(roles)} alive",
            ),
            Check(
                name="pane_idle",
                ok=busy is None,
                detail="the pane is at a shell prompt" if busy is None else f"still running `{busy}`",
            ),
        ]
        waited = deps.clock.monotonic() - started
        if all(c.ok for c in checks) or waited >= deps.verify_timeout_s:
            return Verification(ok=all(c.ok for c in checks), checks=checks, waited_s=round(waited, 1))
        deps.clock.sleep(deps.verify_poll_s)


def _busy(pane: PaneLike | None) -> str | None:
    if pane is None:
        return None
    try:
        return pane.busy_with()
    except TmuxError:  # the pane went away: treat as idle, the checks say the rest
        return None


def _tail(pane: PaneLike | None) -> list[str]:
    if pane is None:
        return []
    try:
        return pane.lines(history=50)
    except TmuxError:
        return []
