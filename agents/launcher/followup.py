"""The follow-up entry: after a decision, the run's STATUS.md says what was decided, what was sent
word for word, and whether the run came back. It goes through the same STATUS.md sink as the
writer node's entries, once per check-in (its own id, so a re-run of the node never repeats it).
"""

from __future__ import annotations

from pathlib import Path

from rlagent.agents.launcher.deps import LauncherDeps
from rlagent.models.actions import RESTARTS, ApprovalRequest, LaunchOutcome, LaunchStatus
from rlagent.models.state import CheckinState
from rlagent.tools.templates import render


def followup_marker(run_key: str, checkin: int) -> str:
    return f"<!-- rlagent:followup {run_key}#{checkin} -->"


def render_followup(state: CheckinState, request: ApprovalRequest, outcome: LaunchOutcome, marker: str) -> str:
    """The decision, what was sent word for word, and the verification, as a runbook entry."""
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
    return render(
        "followup_entry.j2",
        at=outcome.at,
        step=step,
        max_steps=state.memory.config.max_steps,
        health=health,
        request=request,
        outcome=outcome,
        marker=marker,
    )


def append_followup(state: CheckinState, request: ApprovalRequest, outcome: LaunchOutcome, deps: LauncherDeps) -> bool:
    """Append the follow-up entry (unless writing is off); True if it was appended now."""
    if not deps.write:
        return False
    marker = followup_marker(deps.run_key, state.checkin)
    try:
        return deps.status.append(Path(state.run.run_dir), render_followup(state, request, outcome, marker), marker)
    except OSError as exc:  # a full disk: nothing half-written is left; the outcome is still reported
        deps.notify(f"the follow-up entry could not be appended to STATUS.md: {exc.strerror or exc}")
        return False
