"""The review team with the LLM on: each rules reviewer paired with its Claude persona."""

from __future__ import annotations

from rlagent.agents.review.auditor import EvidenceAuditor
from rlagent.agents.review.claude_auditor import ClaudeEvidenceAuditor
from rlagent.agents.review.claude_base import BothMustApprove, ClaudePersona
from rlagent.agents.review.claude_effect import ClaudeEffectReviewer
from rlagent.agents.review.claude_safety import ClaudeSafetyOfficer
from rlagent.agents.review.effect import EffectReviewer
from rlagent.agents.review.protocol import Reviewer
from rlagent.agents.review.safety import SafetyOfficer
from rlagent.tools.llm.budget import Session

PERSONAS: dict[type, type[ClaudePersona]] = {
    EvidenceAuditor: ClaudeEvidenceAuditor,
    SafetyOfficer: ClaudeSafetyOfficer,
    EffectReviewer: ClaudeEffectReviewer,
}


def claude_team(reviewers: list[Reviewer], session: Session | None) -> list[Reviewer]:
    """The same slots, each now needing both the rules reviewer and its persona to approve; a
    reviewer without a persona stays as it is. Without a session (Claude off), the team is
    unchanged. The personas use this check-in's session, passed in."""
    if session is None:
        return reviewers
    team: list[Reviewer] = []
    for reviewer in reviewers:
        persona = PERSONAS.get(type(reviewer))
        team.append(BothMustApprove(reviewer, persona(session)) if persona else reviewer)
    return team
