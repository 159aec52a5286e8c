"""Claude personas in the review team's slots, and how a slot composes the two verdicts.

With the LLM on, each slot (evidence auditor, safety officer, effect reviewer) is the rules
reviewer *and* its Claude persona, and approves only if both do: Claude can add a rejection,
never overturn one of the rules. When Claude is unavailable, over budget or answers invalidly
(after one repair), the rules verdict stands alone and the verdict says so. Each persona is
forced to a structured verdict (its own pydantic model, used as the tool schema).
"""

from __future__ import annotations

from typing import Any, ClassVar

from loguru import logger
from pydantic import BaseModel

from rlagent.agents.llm.call import ask
from rlagent.agents.llm.evidence import Verifier
from rlagent.agents.llm.prompts import render
from rlagent.agents.review.protocol import Reviewer, ReviewPacket
from rlagent.models.actions import Check, Verdict
from rlagent.models.observation import MetricHistory
from rlagent.tools.llm.budget import Session
from rlagent.tools.llm.client import LLMError
from rlagent.tools.untrusted import prose


class ClaudePersona:
    """One duty argued by Claude. Subclasses give the template, the tool, its model and how a
    validated answer becomes checks. It is given the check-in's session (its calls count
    towards the check-in's budgets and record)."""

    role: ClassVar[str]
    persona: ClassVar[str]
    duty: ClassVar[str]
    template: ClassVar[str]
    tool: ClassVar[str]
    answer: ClassVar[type[BaseModel]]

    def __init__(self, session: Session) -> None:
        self.session = session

    def context(self, packet: ReviewPacket) -> dict[str, Any]:
        """Extra template values of this duty."""
        return {}

    def verdict_checks(self, packet: ReviewPacket, answer: Any) -> list[Check]:
        raise NotImplementedError

    def checks(self, packet: ReviewPacket) -> list[Check]:
        """This persona's checks; a failure of Claude is one `ok` note (the rules verdict stands)."""
        session = self.session
        try:
            prompt = render(
                self.template,
                packet=packet,
                persona=self.persona,
                duty=self.duty,
                tool=self.tool,
                now=packet.now,
                **self.context(packet),
            )
            got = ask(session, session.settings, role=self.role, prompt=prompt, tool=self.tool, model=self.answer)
            return self.verdict_checks(packet, got.value)
        except LLMError as exc:
            session.failed(self.role, exc)
            return [
                Check(name="claude_unavailable", ok=True, detail=f"Claude {self.persona}: {exc.reason}; the rules verdict stands")
            ]
        except Exception as exc:  # rule 5: a bug here must not block or crash the check-in
            logger.exception("Claude {} failed", self.persona)
            session.failed(self.role, LLMError(f"internal error ({type(exc).__name__})"))
            return [
                Check(
                    name="claude_unavailable", ok=True, detail=f"Claude {self.persona}: internal error; the rules verdict stands"
                )
            ]


def disk_verifier(packet: ReviewPacket) -> Verifier:
    """Checks quotes against the files themselves (metric values are re-read from the logs)."""
    return Verifier(packet.run_dir, packet.run.layout, MetricHistory(), list(packet.observation.rollouts), disk=True)


def opinion(approve: bool, reasons: list[str], who: str) -> Check:
    text = prose(" ".join(reasons), 400)
    if approve:
        return Check(name="claude_approves", ok=True, detail=f"Claude {who}: {text}")
    return Check(name="claude_rejects", ok=False, detail=f"Claude {who}: {text}")


class BothMustApprove:
    """A review slot with the LLM on: the rules reviewer and its Claude persona (logical AND)."""

    def __init__(self, rules: Reviewer, persona: ClaudePersona) -> None:
        self.rules = rules
        self.persona = persona
        self.name = rules.name
        self.duty = rules.duty

    def review(self, packet: ReviewPacket) -> Verdict:
        ruled = self.rules.review(packet)
        checks = [*ruled.reasons, *self.persona.checks(packet)]
        return Verdict(reviewer=self.name, duty=self.duty, approve=ruled.approve and all(c.ok for c in checks), reasons=checks)
