"""The review team: independent reviewers with distinct duties who must all approve a proposal.

auditor.EvidenceAuditor   re-reads the load-bearing claim from disk
safety.SafetyOfficer      checkpoint, finished run, restart budget and loops, the exact command
effect.EffectReviewer     the action addresses the finding; overrides allowed and in range
"""

from rlagent.agents.review.auditor import EvidenceAuditor
from rlagent.agents.review.effect import EffectReviewer
from rlagent.agents.review.node import ReviewDeps, make_team_review, run_reviewers
from rlagent.agents.review.protocol import Reviewer, ReviewPacket
from rlagent.agents.review.safety import SafetyOfficer


def default_reviewers(max_restarts_per_day: int = 3) -> list[Reviewer]:
    return [EvidenceAuditor(), SafetyOfficer(max_restarts_per_day=max_restarts_per_day), EffectReviewer()]


__all__ = [
    "EffectReviewer",
    "EvidenceAuditor",
    "ReviewDeps",
    "ReviewPacket",
    "Reviewer",
    "SafetyOfficer",
    "default_reviewers",
    "make_team_review",
    "run_reviewers",
]
