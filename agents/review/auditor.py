"""The evidence auditor: re-reads the proposal's load-bearing claim from disk and rejects it if
it does not hold. It trusts nothing the collector, the rules or an LLM wrote down: the log line
at file:line, the metric value at its step, the process table, the newest step are read again.
"""

from __future__ import annotations

from rlagent.agents.review.protocol import ReviewPacket
from rlagent.models.actions import Check, LogClaim, MetricClaim, ProcessClaim, SlurmClaim, StallClaim, Verdict
from rlagent.tools.evidence import inside, line_at, metric_on_disk, newest_step, process_logs, same_value
from rlagent.tools.processes import find_run_processes
from rlagent.tools.slurm import job_states
from rlagent.tools.textfmt import fmt

MATCH_CHARS = 120
"""The claim's text must appear on the cited line; its head is enough and survives truncation."""


class EvidenceAuditor:
    name = "evidence auditor"
    duty = "re-reads the load-bearing claim from disk"

    def review(self, packet: ReviewPacket) -> Verdict:
        return Verdict.from_checks(self.name, self.duty, [self._addressed(packet), self._claim(packet)])

    def _addressed(self, packet: ReviewPacket) -> Check:
        known = {f.id for f in packet.findings}
        missing = [i for i in packet.proposal.addresses if i not in known]
        if missing or not packet.proposal.addresses:
            return Check(name="findings_exist", ok=False, detail=f"not among this check-in's findings: {', '.join(missing)}")
        return Check(name="findings_exist", ok=True, detail=f"{', '.join(packet.proposal.addresses)} reported this check-in")

    def _claim(self, packet: ReviewPacket) -> Check:
        claim = packet.proposal.claim
        if isinstance(claim, LogClaim):
            return self._log(packet, claim)
        if isinstance(claim, MetricClaim):
            return self._metric(packet, claim)
        if isinstance(claim, ProcessClaim):
            return self._processes(packet, claim)
        if isinstance(claim, SlurmClaim):
            return self._slurm(claim)
        return self._stall(packet, claim)

    def _slurm(self, claim: SlurmClaim) -> Check:
        report = job_states([claim.job_id])
        job = report.job(claim.job_id)
        if job is None:
            return Check(
                name="claim_on_disk", ok=False, detail=f"SLURM does not know job {claim.job_id} now ({'; '.join(report.notes)})"
            )
        if job.state != claim.state:
            return Check(name="claim_on_disk", ok=False, detail=f"SLURM job {claim.job_id} is {job.state} now, not {claim.state}")
        return Check(name="claim_on_disk", ok=True, detail=f"{claim.cite()} (asked {job.source} again)")

    def _log(self, packet: ReviewPacket, claim: LogClaim) -> Check:
        path = inside(packet.run_dir, claim.file)
        if path is None:
            return Check(name="claim_on_disk", ok=False, detail=f"{claim.file} is not a file inside the run dir")
        line = line_at(path, claim.line)
        if line is None:
            return Check(name="claim_on_disk", ok=False, detail=f"{claim.file} has no line {claim.line}")
        wanted = claim.text.strip()[:MATCH_CHARS]
        if not wanted or wanted not in line:
            return Check(name="claim_on_disk", ok=False, detail=f"{claim.file}:{claim.line} reads {line[:160]!r}, not the claim")
        return Check(name="claim_on_disk", ok=True, detail=f"{claim.file}:{claim.line} reads {line.strip()[:160]!r}")

    def _metric(self, packet: ReviewPacket, claim: MetricClaim) -> Check:
        value = metric_on_disk(packet.run_dir, packet.run.layout, claim.process, claim.metric, claim.step)
        if value is None:
            return Check(name="claim_on_disk", ok=False, detail=f"no {claim.process} {claim.metric} at step {claim.step} on disk")
        if not same_value(value, claim.value):
            return Check(
                name="claim_on_disk",
                ok=False,
                detail=f"{claim.process} {claim.metric} at step {claim.step} is {fmt(value)} on disk, not {fmt(claim.value)}",
            )
        return Check(name="claim_on_disk", ok=True, detail=f"{claim.cite()} (step line re-read)")

    def _processes(self, packet: ReviewPacket, claim: ProcessClaim) -> Check:
        if not packet.live:
            return Check(name="claim_on_disk", ok=False, detail="processes cannot be checked in an offline check-in")
        found, how = find_run_processes(packet.run_dir, packet.run.name)
        alive = sorted({p.role for p in found} & set(claim.missing))
        if alive:
            return Check(name="claim_on_disk", ok=False, detail=f"{', '.join(alive)} is alive now ({how})")
        return Check(name="claim_on_disk", ok=True, detail=f"{claim.cite()} (process table re-read: {how})")

    def _stall(self, packet: ReviewPacket, claim: StallClaim) -> Check:
        steps = [
            s for p in process_logs(packet.run_dir, packet.run.layout, claim.process) if (s := newest_step(p, claim.process))
        ]
        newest = max(steps, default=None)
        if newest is None:
            return Check(name="claim_on_disk", ok=False, detail=f"no {claim.process} step line found on disk")
        if newest > claim.last_step:
            return Check(name="claim_on_disk", ok=False, detail=f"{claim.process} reached step {newest} since")
        return Check(name="claim_on_disk", ok=True, detail=f"newest {claim.process} step on disk is still {newest}")
