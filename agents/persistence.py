"""Findings across check-ins: a finding reported before is said to persist (since when, for how
many check-ins), which is how a trend across check-ins reaches the entry; one that cleared is
forgotten. Used by the rules' diagnostician and, after Claude's additions, by its LLM path."""

from __future__ import annotations

from datetime import datetime

from rlagent.models.findings import Finding, FindingRecord


def with_persistence(
    findings: list[Finding], remembered: dict[str, FindingRecord], now: datetime
) -> tuple[list[Finding], dict[str, FindingRecord]]:
    """Annotate findings seen before; forget the ones that cleared."""
    out: list[Finding] = []
    records: dict[str, FindingRecord] = {}
    for finding in findings:
        earlier = remembered.get(finding.id)
        record = (
            FindingRecord(since=earlier.since, checkins=earlier.checkins + 1) if earlier else FindingRecord(since=now, checkins=1)
        )
        records[finding.id] = record
        out.append(finding.model_copy(update={"since": record.since, "checkins": record.checkins}))
    return out, records
