"""Launcher node: the gate. Shows a person the exact command, and only on their approval types it
into the run's tmux `Launcher` pane, then verifies the run came back and appends a follow-up entry.

The node calls LangGraph `interrupt()` first and does everything with side effects after it:
on resume LangGraph re-runs the node from its first line. The send itself is made at most once
by a write-ahead record (tools.journal); the follow-up entry is appended once by its id.
At send time the preconditions are checked again (the pane is idle, the run is unchanged since
review, the approval has not expired): an approval is for one exact command in one situation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from langgraph.types import interrupt
from pydantic import BaseModel

from rlagent.agents.writer import STATUS_FILE, sigint_deferred, templates
from rlagent.models.actions import (
    ActionKind,
    ApprovalRequest,
    Check,
    Decision,
    DispatchRecord,
    LaunchOutcome,
    LaunchStatus,
    Review,
    TmuxTarget,
    Verification,
)
from rlagent.models.run import Layout
from rlagent.models.state import CheckinState, typed_node
from rlagent.tools import journal
from rlagent.tools.checkpoints import checkpoint_parts, newest_complete
from rlagent.tools.evidence import newest_step, process_logs
from rlagent.tools.launch_command import CommandError, build_argv
from rlagent.tools.layout import current_attempt
from rlagent.tools.processes import find_run_processes
from rlagent.tools.statusfile import append_entry
from rlagent.tools.tmux import PaneLike, TmuxError, open_launcher

RESTARTS = (ActionKind.RESTART, ActionKind.RESTART_WITH_OVERRIDES)


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class LauncherDeps:
    journal_dir: Path
    """Where the write-ahead dispatch records live (the run's state dir)."""
    run_key: str
    clock: Callable[[], datetime]
    verify_timeout_s: float = 600.0
    verify_poll_s: float = 2.0
    required_roles: tuple[str, ...] = ("Trainer", "Orchestrator")
    write: bool = True
    notify: Callable[[str], None] = field(default=_quiet)
    """Progress lines for the person who approved (sent, verifying, verified)."""
    open_pane: Callable[[TmuxTarget], PaneLike] = field(default=open_launcher)
    """How the Launcher pane is reached (tools.tmux; a fake in tests)."""


class Baseline(BaseModel):
    """The run as it was just before the send, to tell what changed after it."""

    attempt: str | None = None
    trainer_log: str | None = None
    trainer_offset: int = 0
    sent_at: datetime | None = None


def followup_marker(run_key: str, checkin: int) -> str:
    return f"<!-- rlagent:followup {run_key}#{checkin} -->"


def agreed_review(state: CheckinState) -> Review:
    review = state.out.reviews[-1]
    assert review.agreed and review.plan.send is not None, "the router sends only agreed, built commands here"
    return review


def approval_request(state: CheckinState) -> ApprovalRequest:
    """Everything a person needs to decide; a pure function of the state (the node re-runs)."""
    review = agreed_review(state)
    proposal, obs = review.proposal, state.out.observation
    assert obs is not None
    findings = {f.id: f for f in state.out.findings}
    why = [f"{fid} ({findings[fid].severity.value}): {findings[fid].summary}" for fid in proposal.addresses if fid in findings]
    why.append(proposal.rationale)
    plan = review.plan
    source = plan.launch.detail if plan.launch else "tmux key"
    return ApprovalRequest(
        run_dir=state.run.run_dir,
        checkin=state.checkin,
        action=proposal.action,
        headline=proposal.headline(),
        command=plan.display(),
        target=plan.target,
        source=source,
        why=why,
        verdicts=review.verdicts,
        created_at=obs.now,
        expires_at=obs.now + timedelta(seconds=state.gate.expiry_s),
    )


def make_launcher(deps: LauncherDeps) -> Callable[[CheckinState], dict]:
    def launcher(state: CheckinState) -> dict:
        request = approval_request(state)
        answer = interrupt(request.model_dump(mode="json"))
        # Side effects from here on: this part runs only with a person's answer.
        decision = Decision.model_validate(answer)
        outcome, record = carry_out(state, request, decision, deps)
        append_followup(state, request, outcome, deps)
        update: dict = {"launch": outcome}
        if record is not None:
            update["dispatches"] = [*state.memory.dispatches, record]
        return update

    return typed_node(launcher)


def carry_out(
    state: CheckinState, request: ApprovalRequest, decision: Decision, deps: LauncherDeps
) -> tuple[LaunchOutcome, DispatchRecord | None]:
    review = agreed_review(state)
    plan, proposal = review.plan, review.proposal

    def outcome(status: LaunchStatus, note: str, **more) -> LaunchOutcome:
        return LaunchOutcome(status=status, decision=decision, note=note, target=plan.target, at=deps.clock(), **more)

    if not decision.approved:
        if decision.how == "expired":
            return outcome(LaunchStatus.EXPIRED, f"no answer before {request.expires_at:%Y-%m-%d %H:%M} UTC: nothing sent"), None
        return outcome(LaunchStatus.DECLINED, f"declined by {decision.by}: nothing sent"), None
    if decision.at > request.expires_at:
        return outcome(
            LaunchStatus.EXPIRED,
            f"approval came after the request expired at {request.expires_at:%Y-%m-%d %H:%M} UTC: nothing sent",
        ), None
    earlier = journal.recall(deps.journal_dir, state.checkin)
    if earlier and earlier.get("command") == request.command:
        baseline = Baseline.model_validate(earlier.get("baseline") or {})
        deps.notify(f"already sent to {plan.target.describe()} at {baseline.sent_at}; verifying again")
        pane = None
    else:
        try:
            pane = deps.open_pane(plan.target)
            busy = pane.busy_with()
        except TmuxError as exc:
            return outcome(LaunchStatus.ERROR, f"{exc}: nothing sent"), None
        refusal = precondition_failure(state, review, busy)
        if refusal:
            return outcome(LaunchStatus.REFUSED, f"{refusal}: nothing sent"), None
        baseline = take_baseline(state)
        entry = {"command": request.command, "decision": decision.model_dump(mode="json")}
        journal.record(
            deps.journal_dir, state.checkin, {**entry, "state": "sending", "baseline": baseline.model_dump(mode="json")}
        )
        if plan.keys:
            pane.send_key(plan.send or "")
        else:
            pane.send_line(plan.send or "")
        baseline.sent_at = deps.clock()
        journal.record(deps.journal_dir, state.checkin, {**entry, "state": "sent", "baseline": baseline.model_dump(mode="json")})
        deps.notify(f"sent to {plan.target.describe()}: {request.command}")
    deps.notify(f"verifying (up to {deps.verify_timeout_s:.0f} s)")
    if proposal.action in RESTARTS:
        verification = verify_restart(state, baseline, plan.resume_step or 0, deps, pane)
        note = (
            "restart verified"
            if verification.ok
            else "restart failed: " + "; ".join(c.detail for c in verification.checks if not c.ok)
        )
    else:
        verification = verify_stop(state, deps, pane)
        note = (
            "stop verified"
            if verification.ok
            else "stop not confirmed: " + "; ".join(c.detail for c in verification.checks if not c.ok)
        )
    deps.notify(note)
    sent_at = baseline.sent_at or deps.clock()
    record = DispatchRecord(
        checkin=state.checkin, action=proposal.action, resume_step=plan.resume_step, sent_at=sent_at, verified=verification.ok
    )
    return outcome(LaunchStatus.SENT, note, sent=request.command, verification=verification), record


def precondition_failure(state: CheckinState, review: Review, busy: str | None) -> str | None:
    """Why the approved command must not go out now, or None. Re-checked at send time because
    the approval may come hours after the review."""
    plan, proposal = review.plan, review.proposal
    if proposal.action is ActionKind.STOP:
        return None if busy else f"the {plan.target.window} pane is at a shell prompt: nothing to stop"
    if busy:
        return f"the {plan.target.window} pane is busy running `{busy}` (a restart goes only to an idle shell prompt)"
    run = state.run
    newest = newest_complete(checkpoint_parts(Path(run.run_dir), run.layout, newest=10**6))
    if newest != plan.resume_step:
        return f"the newest complete checkpoint is now {newest}, not {plan.resume_step} as reviewed"
    assert plan.launch is not None
    try:
        argv = build_argv(
            plan.launch.argv,
            layout=run.layout.value,
            run_dir=run.run_dir,
            run_name=run.name,
            resume_step=newest,
            overrides=proposal.overrides,
            max_steps=state.memory.config.max_steps,
        )
    except CommandError as exc:
        return str(exc)
    if argv != plan.argv:
        return "the command built now differs from the one reviewed"
    return None


def take_baseline(state: CheckinState) -> Baseline:
    run_dir = Path(state.run.run_dir)
    if state.run.layout is Layout.H:
        return Baseline(attempt=current_attempt(run_dir))
    logs = process_logs(run_dir, state.run.layout, "trainer")
    if not logs:
        return Baseline()
    return Baseline(trainer_log=str(logs[0].relative_to(run_dir)), trainer_offset=logs[0].stat().st_size)


def _roles(state: CheckinState) -> tuple[list[str], str]:
    found, how = find_run_processes(Path(state.run.run_dir), state.run.name)
    return sorted({p.role for p in found}), how


def restart_checks(
    state: CheckinState, baseline: Baseline, resume_step: int, deps: LauncherDeps
) -> tuple[list[Check], int | None, str | None]:
    run_dir, layout = Path(state.run.run_dir), state.run.layout
    roles, how = _roles(state)
    missing = [r for r in deps.required_roles if r not in roles]
    checks = [
        Check(
            name="processes_back",
            ok=not missing,
            detail=f"PRIME-RL {', '.join(roles) or 'none'} alive"
            if not missing
            else f"no {', '.join(missing)} process yet ({how})",
        )
    ]
    step: int | None = None
    attempt: str | None = None
    if layout is Layout.H:
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
    started = time.monotonic()
    seen_busy = False
    while True:
        checks, step, attempt = restart_checks(state, baseline, resume_step, deps)
        waited = time.monotonic() - started
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
        time.sleep(deps.verify_poll_s)


def verify_stop(state: CheckinState, deps: LauncherDeps, pane: PaneLike | None) -> Verification:
    started = time.monotonic()
    while True:
        roles, _ = _roles(state)
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
        waited = time.monotonic() - started
        if all(c.ok for c in checks) or waited >= deps.verify_timeout_s:
            return Verification(ok=all(c.ok for c in checks), checks=checks, waited_s=round(waited, 1))
        time.sleep(deps.verify_poll_s)


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


def append_followup(state: CheckinState, request: ApprovalRequest, outcome: LaunchOutcome, deps: LauncherDeps) -> bool:
    """The follow-up entry: the decision, what was sent word for word, and the verification."""
    if not deps.write:
        return False
    verification = outcome.verification
    step = verification.step if verification and verification.step is not None else None
    if step is None and state.out.observation is not None:
        step = (
            state.out.observation.trainer_step
            if state.out.observation.trainer_step is not None
            else state.out.observation.orchestrator_step
        )
    if outcome.status is LaunchStatus.SENT and verification is not None:
        health = "Healthy" if verification.ok and request.action in RESTARTS else "Down"
    else:
        health = state.out.health.value if state.out.health else "Down"
    text = (
        templates()
        .get_template("followup_entry.j2")
        .render(
            at=outcome.at,
            step=step,
            max_steps=state.memory.config.max_steps,
            health=health,
            request=request,
            outcome=outcome,
            marker=followup_marker(deps.run_key, state.checkin),
        )
    )
    try:
        with sigint_deferred():
            return append_entry(Path(state.run.run_dir) / STATUS_FILE, text, followup_marker(deps.run_key, state.checkin))
    except OSError as exc:  # a full disk: nothing half-written is left; the outcome is still reported
        deps.notify(f"the follow-up entry could not be appended to STATUS.md: {exc.strerror or exc}")
        return False


def render_request(request: ApprovalRequest, run_dir: str) -> str:
    """The approval prompt's text: the command, why, the verdicts, the expiry."""
    return templates().get_template("approval_request.j2").render(request=request, run_dir=run_dir)
