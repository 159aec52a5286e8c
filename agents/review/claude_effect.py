"""The effect reviewer as a Claude persona: would the action fix what was found?"""

from __future__ import annotations

from rlagent.agents.llm.models import EffectVerdict
from rlagent.agents.review.claude_base import ClaudePersona, opinion
from rlagent.agents.review.protocol import ReviewPacket
from rlagent.models.actions import Check


class ClaudeEffectReviewer(ClaudePersona):
    role = "effect_reviewer"
    persona = "effect reviewer"
    duty = "the action addresses the finding; overrides allowed and in range"
    template = "llm_review_effect.j2"
    tool = "effect_verdict"
    answer = EffectVerdict

    def verdict_checks(self, packet: ReviewPacket, answer: EffectVerdict) -> list[Check]:
        return [opinion(answer.approve, answer.reasons, self.persona)]
