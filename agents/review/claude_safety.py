"""The safety officer as a Claude persona: is it safe to send this exact command now?"""

from __future__ import annotations

from typing import Any

from rlagent.agents.llm.models import SafetyVerdict
from rlagent.agents.review.claude_base import ClaudePersona, opinion
from rlagent.agents.review.protocol import ReviewPacket
from rlagent.models.actions import Check
from rlagent.tools.checkpoints import newest_complete
from rlagent.tools.untrusted import prose


class ClaudeSafetyOfficer(ClaudePersona):
    role = "safety_officer"
    persona = "safety officer"
    duty = "checkpoint, finished run, restart budget and loops, the exact command"
    template = "llm_review_safety.j2"
    tool = "safety_verdict"
    answer = SafetyVerdict

    def context(self, packet: ReviewPacket) -> dict[str, Any]:
        obs = packet.observation
        processes = obs.live.processes
        if processes is None:
            alive = "not probed (offline): whether the run is down is unknown"
        else:
            alive = ", ".join(f"{p.role} (pid {p.pid})" for p in processes) or "none alive"
        sent = [
            f"check-in #{d.checkin} {d.action.value} from step {d.resume_step} at {d.sent_at:%Y-%m-%d %H:%M} UTC"
            + ("" if d.verified is None else (", verified" if d.verified else ", not verified"))
            for d in packet.dispatches[-5:]
        ]
        return {
            "finished": any(f.id == "run_finished" for f in packet.findings),
            "checkpoints": ", ".join(f"{s} ({'+'.join(p)})" for s, p in sorted(obs.checkpoints.items())[-3:]) or "none",
            "newest": newest_complete(obs.checkpoints),
            "processes": alive,
            "dispatches": "; ".join(sent) or "none",
        }

    def verdict_checks(self, packet: ReviewPacket, answer: SafetyVerdict) -> list[Check]:
        concerns = [
            Check(name=f"claude_{c.name}"[:60], ok=answer.approve, detail=f"Claude safety officer: {prose(c.detail, 300)}")
            for c in answer.concerns
        ]
        return [*concerns, opinion(answer.approve, answer.reasons, self.persona)]
