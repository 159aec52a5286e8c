"""Diagnostician node: the rules turn the observation and the run's history into findings.

A finding reported by earlier check-ins is said to persist (since when, for how many
check-ins), which is how a trend across check-ins reaches the entry.
"""

from __future__ import annotations

from collections.abc import Callable

from rlagent.agents.rules import health_of, run_rules
from rlagent.agents.rules.context import RuleContext
from rlagent.agents.rules.thresholds import Thresholds
from rlagent.graph.state import CheckinState, Finding, FindingRecord


def make_diagnostician(thresholds: Thresholds) -> Callable[[CheckinState], dict]:
    def diagnostician(state: CheckinState) -> dict:
        return diagnose(state, thresholds)

    return diagnostician


def diagnose(state: CheckinState, thresholds: Thresholds) -> dict:
    assert state.observation is not None, "the collector runs before the diagnostician"
    ctx = RuleContext.from_state(state, thresholds)
    findings = run_rules(ctx)
    findings, remembered = with_persistence(findings, state.remembered, state.observation.now)
    return {"findings": findings, "health": health_of(findings, ctx), "remembered": remembered, "proposal": None}


def with_persistence(
    findings: list[Finding], remembered: dict[str, FindingRecord], now
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
