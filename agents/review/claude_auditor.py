"""The evidence auditor as a Claude persona: it reads what rlagent re-read from disk around the
claim and must quote, exactly, the raw line or values it verified. rlagent checks every quote
against the files; an approval whose quote does not check out counts as a rejection."""

from __future__ import annotations

from typing import Any

from rlagent.agents.llm.evidence import Readers
from rlagent.agents.llm.models import AuditVerdict, ReadLogLines
from rlagent.agents.review.claude_base import ClaudePersona, disk_verifier, opinion
from rlagent.agents.review.protocol import ReviewPacket
from rlagent.models.actions import Check, LogClaim, MetricClaim, ProcessClaim, SlurmClaim, StallClaim
from rlagent.tools.evidence import metric_on_disk, newest_step, process_logs, step_line_texts
from rlagent.tools.slurm import job_states
from rlagent.tools.textfmt import fmt
from rlagent.tools.untrusted import clip, data_fence


class ClaudeEvidenceAuditor(ClaudePersona):
    role = "evidence_auditor"
    persona = "evidence auditor"
    duty = "re-reads the load-bearing claim from disk"
    template = "llm_review_auditor.j2"
    tool = "audit_verdict"
    answer = AuditVerdict

    def context(self, packet: ReviewPacket) -> dict[str, Any]:
        return {"reread": reread(packet)}

    def verdict_checks(self, packet: ReviewPacket, answer: AuditVerdict) -> list[Check]:
        verifier = disk_verifier(packet)
        checks = []
        for evidence in answer.verified:
            problem = verifier.check(evidence)
            checks.append(
                Check(name="claude_quote_on_disk", ok=True, detail=f"verified: {evidence.cite()}")
                if problem is None
                else Check(name="claude_quote_on_disk", ok=not answer.approve, detail=f"Claude's quote does not hold: {problem}")
            )
        return [*checks, opinion(answer.approve, answer.reasons, self.persona)]


def reread(packet: ReviewPacket) -> str:
    """The claim's facts read again from disk by rlagent (not from the collector's memory)."""
    claim = packet.proposal.claim
    if isinstance(claim, LogClaim):
        readers = Readers(disk_verifier(packet))
        return readers.read_log_lines(ReadLogLines(file=claim.file, line=claim.line, before=3, after=3))
    if isinstance(claim, MetricClaim):
        values = []
        for step in range(max(0, claim.step - 2), claim.step + 1):
            value = metric_on_disk(packet.run_dir, packet.run.layout, claim.process, claim.metric, step)
            values.append(f"{claim.process} {claim.metric} @ step {step} = {fmt(value)}")
        lines = step_line_cites(packet, claim.process, claim.step)
        return "\n".join(values) + "\n" + data_fence("\n".join(lines) or "no step line found", f"step {claim.step} lines re-read")
    if isinstance(claim, ProcessClaim):
        processes = packet.observation.live.processes
        if processes is None:
            return "processes were not probed (offline): the claim cannot be checked"
        return "live processes of the run: " + (", ".join(f"{p.role} (pid {p.pid})" for p in processes) or "none")
    if isinstance(claim, SlurmClaim):
        job = job_states([claim.job_id]).job(claim.job_id)
        return f"SLURM job {claim.job_id} now: {job.state if job else 'unknown to SLURM'}"
    assert isinstance(claim, StallClaim)
    steps = [s for p in process_logs(packet.run_dir, packet.run.layout, claim.process) if (s := newest_step(p, claim.process))]
    newest = max(steps, default=None)
    return data_fence(f"newest {claim.process} step on disk: {newest if newest is not None else 'none'}", "step lines re-read")


def step_line_cites(packet: ReviewPacket, process: str, step: int, limit: int = 2) -> list[str]:
    """`file:line: text` of the process's step lines for `step` in the run's current logs (read on
    from where the last read of each log stopped: tools/evidence)."""
    out: list[str] = []
    for path in process_logs(packet.run_dir, packet.run.layout, process):
        rel = path.relative_to(packet.run_dir)
        out += [f"{rel}:{number}: {clip(text, 300)}" for number, text in step_line_texts(path, process, step)]
    return out[-limit:]
