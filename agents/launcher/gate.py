"""The gate: the launcher node. Shows a person the exact command (LangGraph `interrupt()`) and
acts only on their answer: a No, an expired request or a late Yes sends nothing; a Yes in time
goes to the dispatch, then to the verification, then to the follow-up entry.

The node calls `interrupt()` first and does everything with side effects after it: on resume
LangGraph re-runs the node from its first line, so everything before it is a pure function of
the state (the request), and what comes after is made safe to repeat (dispatch.py, followup.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from langgraph.types import interrupt

from rlagent.agents.launcher.deps import LauncherDeps
from rlagent.agents.launcher.dispatch import NotSent, dispatch
from rlagent.agents.launcher.followup import append_followup
from rlagent.agents.launcher.verify import verify
from rlagent.models.actions import (
    ApprovalRequest,
    Decision,
    DispatchRecord,
    LaunchOutcome,
    LaunchStatus,
    Review,
)
from rlagent.models.state import CheckinState, typed_node


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
    rationale = proposal.rationale
    for fid in proposal.addresses:  # the lines above already say each finding: the rationale adds the rest
        if fid in findings:
            rationale = rationale.replace(f"{fid}: {findings[fid].summary}. ", "", 1)
    why.append(rationale)
    plan = review.plan
    if plan.launch is not None:
        source = plan.launch.detail
    elif proposal.job_id:
        source = f"scancel of the run's SLURM job {proposal.job_id}"
    else:
        source = "tmux key"
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
    """The decision acted on: nothing sent without a Yes in time; else the send and its check."""
    review = agreed_review(state)
    plan, proposal = review.plan, review.proposal

    def outcome(status: LaunchStatus, note: str, **more) -> LaunchOutcome:
        return LaunchOutcome(status=status, decision=decision, note=note, target=plan.target, at=deps.clock.now(), **more)

    if not decision.approved:
        if decision.how == "expired":
            return outcome(LaunchStatus.EXPIRED, f"no answer before {request.expires_at:%Y-%m-%d %H:%M} UTC: nothing sent"), None
        return outcome(LaunchStatus.DECLINED, f"declined by {decision.by}: nothing sent"), None
    if decision.at > request.expires_at:
        return outcome(
            LaunchStatus.EXPIRED,
            f"approval came after the request expired at {request.expires_at:%Y-%m-%d %H:%M} UTC: nothing sent",
        ), None
    sent = dispatch(state, review, request, decision, deps)
    if isinstance(sent, NotSent):
        return outcome(sent.status, sent.note), None
    deps.notify(f"verifying (up to {deps.verify_timeout_s:.0f} s)")
    verification, note = verify(
        state, proposal.action, sent.baseline, plan.resume_step or 0, deps, sent.pane, job_id=proposal.job_id
    )
    deps.notify(note)
    sent_at = sent.baseline.sent_at or deps.clock.now()
    record = DispatchRecord(
        checkin=state.checkin, action=proposal.action, resume_step=plan.resume_step, sent_at=sent_at, verified=verification.ok
    )
    return outcome(LaunchStatus.SENT, note, sent=request.command, verification=verification), record
