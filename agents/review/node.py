"""The team_review node: build the exact command, then have every reviewer judge it independently.

Unanimity is required; the router sends a rejected proposal back to the diagnostician once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from loguru import logger

from rlagent.agents.command_plan import PlanDeps, plan_command
from rlagent.agents.review.protocol import Reviewer, ReviewPacket
from rlagent.models.actions import Check, Review, Verdict
from rlagent.models.state import CheckinState, typed_node


@dataclass(frozen=True)
class ReviewDeps:
    reviewers: list[Reviewer]
    planning: PlanDeps


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
            verdicts=run_reviewers(deps.reviewers, packet),
        )
        return {"reviews": [*state.out.reviews, review]}

    return typed_node(team_review)
