"""Diagnostician node: the rules turn the observation and the run's history into findings and
at most one typed proposal (agents/proposals.py).

A finding reported by earlier check-ins is said to persist (since when, for how many
check-ins), which is how a trend across check-ins reaches the entry. When the review team
rejected the proposal, the graph comes back here once: the diagnostician revises or withdraws it.
"""

from __future__ import annotations

from collections.abc import Callable

from rlagent.agents.collector import NOTHING_READ
from rlagent.agents.llm.runtime import LLMRuntime
from rlagent.agents.persistence import with_persistence
from rlagent.agents.proposals import propose, revise
from rlagent.agents.rules import health_of, run_rules
from rlagent.agents.rules.context import RuleContext
from rlagent.agents.rules.thresholds import Thresholds
from rlagent.models.run import Health
from rlagent.models.state import CheckinState, applied, typed_node


def make_diagnostician(thresholds: Thresholds, llm: LLMRuntime | None = None) -> Callable[[CheckinState], dict]:
    """The rules always run first; with an LLM runtime, Claude then refines their result (or,
    on a revision round, may withdraw or revise the proposal) and the check-in's LLM use is recorded."""
    claude = llm is not None and llm.enabled
    if claude:  # Claude's path, its prompts and models: 13 ms of imports a rules-only check-in skips
        from rlagent.agents.llm.diagnostician import refine, revise_with_claude

    def diagnostician(state: CheckinState) -> dict:
        if not claude:  # what refine and revise_with_claude give when Claude is off, without loading them
            update = diagnose(state, thresholds)
            if revising(state):
                return update
            return {**update, "llm": None} if llm is None else {**update, **llm.record(applied(state, update), None)}
        if revising(state):
            return revise_with_claude(state, revise(state.out.reviews[-1]), llm, thresholds)
        return refine(state, diagnose(state, thresholds), llm, thresholds)

    return typed_node(diagnostician)


def diagnose(state: CheckinState, thresholds: Thresholds) -> dict:
    assert state.out.observation is not None, "the collector runs before the diagnostician"
    if revising(state):
        proposal, notes = revise(state.out.reviews[-1])
        return {"proposal": proposal, "proposal_notes": [*state.out.proposal_notes, *notes]}
    ctx = RuleContext.from_state(state, thresholds)
    findings = run_rules(ctx)
    findings, remembered = with_persistence(findings, state.memory.remembered, state.out.observation.now)
    proposal, notes = propose(ctx, findings)
    health = health_of(findings, ctx)
    if health is Health.HEALTHY and any(n.startswith(NOTHING_READ) for n in state.out.observation.notes):
        health = Health.DEGRADED  # nothing readable is not Healthy: the run cannot be seen at all
    return {
        "findings": findings,
        "health": health,
        "remembered": remembered,
        "proposal": proposal,
        "proposal_notes": notes,
    }


def revising(state: CheckinState) -> bool:
    """Back from a review that rejected this check-in's proposal."""
    return bool(state.out.reviews) and not state.out.reviews[-1].agreed and state.out.reviews[-1].proposal == state.out.proposal
