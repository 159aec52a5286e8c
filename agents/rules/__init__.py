"""The rule-based diagnostician: turns a check-in's observation and the run's history into
findings (ids and thresholds in reference/findings.md) and the run's health.

It needs no LLM and does no I/O: `run_rules(RuleContext(...))` is a pure function of its input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rlagent.agents.rules import cluster, health, performance, progress, stability
from rlagent.agents.rules.context import RuleContext
from rlagent.agents.rules.thresholds import Thresholds
from rlagent.models.findings import Finding
from rlagent.models.run import Health, Severity

Rule = Callable[[RuleContext], Finding | list[Finding] | None]

RULES: tuple[Rule, ...] = (*health.RULES, *cluster.RULES, *progress.RULES, *stability.RULES, *performance.RULES)

SEVERITY_RANK = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}
DOWN_IDS = frozenset({"run_crashed", "process_down", "run_stalled"}) | cluster.DOWN_IDS
"""Findings that mean the run is not training (when not merely informational)."""

__all__ = ["DOWN_IDS", "RULES", "RuleContext", "Thresholds", "health_of", "run_rules"]


def run_rules(ctx: RuleContext, rules: Iterable[Rule] = RULES) -> list[Finding]:
    """Every finding the rules support, one per id (ids key the persistence across check-ins;
    the most severe wins), critical first, then warning, then info, in rule order within each."""
    by_id: dict[str, Finding] = {}
    for rule in rules:
        result = rule(ctx)
        found = result if isinstance(result, list) else [result] if result is not None else []
        for finding in found:
            kept = by_id.get(finding.id)
            if kept is None or SEVERITY_RANK[finding.severity] < SEVERITY_RANK[kept.severity]:
                by_id[finding.id] = finding
    return sorted(by_id.values(), key=lambda f: SEVERITY_RANK[f.severity])


def health_of(findings: Iterable[Finding], ctx: RuleContext | None = None) -> Health:
    """Down: not training (crashed, a required process gone, stalled). Degraded: training with
    a warning or critical finding. Healthy: otherwise, including a clean finish with notes.
    A crash the run came back from is not Down (its finding is then info)."""
    findings = list(findings)
    if ctx is not None and ctx.crashed:
        return Health.DOWN
    if any(f.id in DOWN_IDS and f.severity != Severity.INFO for f in findings):
        return Health.DOWN
    if any(f.severity in (Severity.WARNING, Severity.CRITICAL) for f in findings):
        return Health.DEGRADED
    return Health.HEALTHY
