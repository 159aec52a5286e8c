"""The team_review node: build the exact command, then have every reviewer judge it independently.

Unanimity is required; the router sends a rejected proposal back to the diagnostician once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from loguru import logger

from rlagent.agents.command_plan import PlanDeps, plan_command
from rlagent.agents.llm.runtime import LLMRuntime
from rlagent.agents.review.protocol import Reviewer, ReviewPacket
from rlagent.models.actions import Check, Review, Verdict
from rlagent.models.state import CheckinState, typed_node


@dataclass(frozen=True)
class ReviewDeps:
    reviewers: list[Reviewer]
    """The rules team; with Claude on, each slot is paired with its persona (claude_team)."""
    planning: PlanDeps
    llm: LLMRuntime | None = None
    """Claude: the check-in's session goes to the personas, and their use is recorded."""


def run_reviewers(reviewers: list[Reviewer], packet: ReviewPacket) -> list[Verdict]:
    """Each reviewer on the same packet; one that fails rejects (it never blocks the check-in)."""
    verdicts = []
    for reviewer in reviewers:
        try:
            verdict = reviewer.review(packet)
        except Exception as exc:  # a reviewer's failure is a rejection, never a crash of the check-in
            logger.warning("reviewer {} failed: {!r}", reviewer.name, exc)
            failure = Check(name="reviewer_failed", ok=False, detail=f"{type(exc).__name__}: {str(exc)[:200]}")
            verdict = Verdict(reviewer=reviewer.name, duty=reviewer.duty, approve=False, reasons=[failure])
        verdicts.append(verdict)
    return verdicts


def make_team_review(deps: ReviewDeps) -> Callable[[CheckinState], dict]:
    def team_review(state: CheckinState) -> dict:
        assert state.out.proposal is not None and state.out.observation is not None
        session = deps.llm.session(state) if deps.llm is not None else None
        plan = plan_command(state, deps.planning)
        packet = ReviewPacket(
            run=state.run,
            proposal=state.out.proposal,
            plan=plan,
            findings=state.out.findings,
            config=state.memory.config,
            observation=state.out.observation,
            dispatches=state.memory.dispatches,
            now=state.out.observation.now,
        )
        review = Review(
            round=len(state.out.reviews) + 1,
            proposal=state.out.proposal,
            plan=plan,
            verdicts=run_reviewers(_team(deps.reviewers, session), packet),
        )
        changes = {"reviews": [*state.out.reviews, review]}
        if deps.llm is not None and session is not None:
            changes |= deps.llm.record(state, session)  # this check-in's use of Claude, personas included
        return changes

    return typed_node(team_review)


def _team(reviewers: list[Reviewer], session) -> list[Reviewer]:
    """The rules team, paired with Claude's personas when Claude is on (their imports are skipped when it is off)."""
    if session is None:
        return reviewers
    from rlagent.agents.review.claude_team import claude_team

    return claude_team(reviewers, session)
