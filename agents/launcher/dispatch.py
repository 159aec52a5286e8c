"""The dispatch: the approved command typed into the run's `Launcher` pane, at most once.

At send time the preconditions are checked again (the pane is idle, or busy for a stop; the run
is unchanged since review): an approval is for one exact command in one situation, and it may
come hours after the review. The send is made at most once by a write-ahead record
(tools.journal): a node re-run after a crash finds the command already sent and only verifies.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlagent.agents.launcher.deps import LauncherDeps
from rlagent.agents.launcher.verify import Baseline, take_baseline
from rlagent.models.actions import ActionKind, ApprovalRequest, Decision, LaunchStatus, Review
from rlagent.models.slurm import ACTIVE_STATES
from rlagent.models.state import CheckinState
from rlagent.tools import journal
from rlagent.tools.checkpoints import checkpoint_parts, newest_complete
from rlagent.tools.launch_command import CommandError, build_argv
from rlagent.tools.resubmit import build_resubmit_argv, resubmit_script
from rlagent.tools.tmux import PaneLike, TmuxError


@dataclass(frozen=True)
class Sent:
    baseline: Baseline
    """The run just before the send (what the verification compares against)."""
    pane: PaneLike | None
    """The pane it went to; None when an earlier run of the node had already sent it."""


@dataclass(frozen=True)
class NotSent:
    status: LaunchStatus
    note: str


def dispatch(
    state: CheckinState, review: Review, request: ApprovalRequest, decision: Decision, deps: LauncherDeps
) -> Sent | NotSent:
    plan = review.plan
    earlier = journal.recall(deps.journal_dir, state.checkin)
    if earlier and earlier.get("command") == request.command:
        baseline = Baseline.model_validate(earlier.get("baseline") or {})
        deps.notify(f"already sent to {plan.target.describe()} at {baseline.sent_at}; verifying again")
        return Sent(baseline, None)
    try:
        pane = deps.open_pane(plan.target)
        busy = pane.busy_with()
    except TmuxError as exc:
        return NotSent(LaunchStatus.ERROR, f"{exc}: nothing sent")
    jobs = run_job_ids(state, review, deps)
    refusal = precondition_failure(state, review, busy, jobs)
    if refusal:
        return NotSent(LaunchStatus.REFUSED, f"{refusal}: nothing sent")
    baseline = take_baseline(state)
    baseline.job_ids = sorted(jobs or {})
    entry = {"command": request.command, "decision": decision.model_dump(mode="json")}
    journal.record(deps.journal_dir, state.checkin, {**entry, "state": "sending", "baseline": baseline.model_dump(mode="json")})
    if plan.keys:
        pane.send_key(plan.send or "")
    else:
        pane.send_line(plan.send or "")
    baseline.sent_at = deps.clock.now()
    journal.record(deps.journal_dir, state.checkin, {**entry, "state": "sent", "baseline": baseline.model_dump(mode="json")})
    deps.notify(f"sent to {plan.target.describe()}: {request.command}")
    return Sent(baseline, pane)


def run_job_ids(state: CheckinState, review: Review, deps: LauncherDeps) -> dict[str, str] | None:
    """SLURM actions: the run's jobs now (id -> state), asked again at send time; None otherwise."""
    if review.proposal.action is not ActionKind.RESUBMIT and not review.proposal.job_id:
        return None
    cluster = deps.cluster.probe(Path(state.run.run_dir))
    return cluster.states() if cluster is not None else {}


def precondition_failure(state: CheckinState, review: Review, busy: str | None, jobs: dict[str, str] | None = None) -> str | None:
    """Why the approved command must not go out now, or None."""
    plan, proposal = review.plan, review.proposal
    if proposal.action is ActionKind.STOP and proposal.job_id:
        if busy:
            return f"the {plan.target.window} pane is busy running `{busy}` (scancel goes only to an idle shell prompt)"
        if jobs is not None and jobs.get(proposal.job_id) not in ACTIVE_STATES:
            return f"SLURM job {proposal.job_id} is {jobs.get(proposal.job_id, 'gone')} now: nothing to cancel"
        return None
    if proposal.action is ActionKind.STOP:
        return None if busy else f"the {plan.target.window} pane is at a shell prompt: nothing to stop"
    if busy:
        return f"the {plan.target.window} pane is busy running `{busy}` (a restart goes only to an idle shell prompt)"
    run = state.run
    newest = newest_complete(checkpoint_parts(Path(run.run_dir), run.layout, newest=10**6))
    if newest != plan.resume_step:
        return f"the newest complete checkpoint is now {newest}, not {plan.resume_step} as reviewed"
    assert plan.launch is not None
    if proposal.action is ActionKind.RESUBMIT:
        active = sorted(j for j, job_state in (jobs or {}).items() if job_state in ACTIVE_STATES)
        if active:
            return f"the run has an active SLURM job again ({', '.join(active)})"
        script, why = resubmit_script(Path(run.run_dir))
        if script is None or [str(script)] != plan.launch.argv:
            return f"the batch script is not the one reviewed ({why or script})"
    try:
        argv = (
            build_resubmit_argv(
                script,
                layout=run.layout.value,
                run_dir=run.run_dir,
                run_name=run.name,
                resume_step=newest,
                overrides=proposal.overrides,
                max_steps=state.memory.config.max_steps,
            )
            if proposal.action is ActionKind.RESUBMIT
            else build_argv(
                plan.launch.argv,
                layout=run.layout.value,
                run_dir=run.run_dir,
                run_name=run.name,
                resume_step=newest,
                overrides=proposal.overrides,
                max_steps=state.memory.config.max_steps,
            )
        )
    except CommandError as exc:
        return str(exc)
    if argv != plan.argv:
        return "the command built now differs from the one reviewed"
    return None
