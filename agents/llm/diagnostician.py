"""The diagnostician with Claude: after the rules, Claude checks their findings, adds what they
missed, explains the run for the Notes, and may choose one typed action.

How its answer is combined with the rules (Claude can add and caution, never remove or overrule):
- the rules' findings always stay; a rejection by Claude is a note with its evidence;
- an extra finding is kept only with evidence that checks out on disk or in the history, only at
  `info`/`warning`, and never for whether the run is alive, down or done (RULES_ONLY);
- Claude's typed action choice is advisory: the check-in's proposal is the rules' one. rlagent
  builds Claude's choice into a typed proposal only to show it (headline, or why it cannot be
  built). The reason: when the rules propose nothing despite a critical finding they declined on
  purpose (a host OOM would recur, NaN may be in the checkpoints, no complete checkpoint), so
  adopting Claude's choice there would let the LLM overturn a decision of the rules;
- on a revision round Claude may withdraw the proposal (caution); otherwise the rules' revision
  goes to review again, and a withdrawal by the rules is final.
Any failure (outage, budget, invalid answer, a bug here) leaves the rules' result untouched and
the entry says why (DESIGN.md rule 5).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loguru import logger
from pydantic import ValidationError

from rlagent.agents.llm.call import ask
from rlagent.agents.llm.context import LEVELS, brief
from rlagent.agents.llm.evidence import Readers, Verifier
from rlagent.agents.llm.models import RULES_ONLY, ActionChoice, Diagnosis, Revision
from rlagent.agents.llm.prompts import base_request, message, render
from rlagent.agents.llm.runtime import LLMRuntime
from rlagent.agents.persistence import with_persistence
from rlagent.agents.proposals import DOWN, STOP_FOR, crash_claim, nan_claim, process_claim
from rlagent.agents.rules.catalogue import finding
from rlagent.agents.rules.context import RuleContext
from rlagent.agents.rules.thresholds import Thresholds
from rlagent.models.actions import KNOBS, ActionKind, Override, Proposal, Review, StallClaim
from rlagent.models.findings import Finding, FindingRecord
from rlagent.models.run import Health, Severity
from rlagent.models.state import CheckinState, applied
from rlagent.tools.checkpoints import newest_complete
from rlagent.tools.llm.budget import Session
from rlagent.tools.llm.client import LLMError, estimate_tokens
from rlagent.tools.untrusted import prose

ROLE = "diagnostician"
TOOL_ROOM = 2500
"""Input tokens left free in the first call for the tool rounds' results."""


def verifier_for(state: CheckinState) -> Verifier:
    assert state.out.observation is not None
    return Verifier(Path(state.run.run_dir), state.run.layout, state.memory.history, list(state.out.observation.rollouts))


def diagnosis_prompt(state: CheckinState, runtime: LLMRuntime) -> str:
    """The user turn at the roomiest compaction level whose request fits the input budget."""
    s = runtime.settings
    assert state.out.observation is not None
    budget = s.max_input_tokens - (TOOL_ROOM if s.max_tool_rounds else 0)
    prefix = estimate_tokens(base_request(s.cache_ttl, s.max_output_tokens))
    text = ""
    for level in LEVELS:
        text = render(
            "llm_diagnostician.j2",
            b=brief(state, level),
            now=state.out.observation.now,
            checkin=state.checkin,
            max_rounds=s.max_tool_rounds,
        )
        if prefix + estimate_tokens({"role": "user", "content": text}) <= budget:
            return text
    room = max(1000, int((budget - prefix) * 3.5) - 200)
    return text[:room] + "\n" + message("observation_cut") + "\n"


def refine(state: CheckinState, update: dict[str, Any], runtime: LLMRuntime, thresholds: Thresholds) -> dict[str, Any]:
    """The rules' update, with Claude's part merged in and the check-in's LLM record."""
    merged = applied(state, update)
    session = runtime.session(merged)
    if session is None:
        return {**update, **runtime.record(merged, session)}
    try:
        answer = ask(
            session,
            runtime.settings,
            role=ROLE,
            prompt=diagnosis_prompt(merged, runtime),
            tool="report_diagnosis",
            model=Diagnosis,
            readers=Readers(verifier := verifier_for(merged)),
            max_rounds=runtime.settings.max_tool_rounds,
        )
        update = combine(merged, update, answer.value, verifier, session, thresholds, earlier=state.memory.remembered)
    except LLMError as exc:
        session.failed(ROLE, exc)
    except Exception as exc:  # rule 5: a bug in handling Claude's answer must not stop the check-in
        logger.exception("the LLM diagnostician failed; going on with the rules")
        session.failed(ROLE, LLMError(f"internal error ({type(exc).__name__}: {prose(exc, 120)})"))
    return {**update, **runtime.record(applied(state, update), session)}


def combine(
    state: CheckinState,
    update: dict[str, Any],
    diagnosis: Diagnosis,
    verifier: Verifier,
    session: Session,
    thresholds: Thresholds,
    earlier: dict[str, FindingRecord],
) -> dict[str, Any]:
    """Claude's diagnosis merged into the rules' update (see the module docstring); `earlier` is
    what the check-ins before this one remembered (persistence is recounted with the additions)."""
    assert state.out.observation is not None
    findings: list[Finding] = list(update["findings"])
    by_id = {f.id: f for f in findings}
    notes = session.notes
    notes.append(f"Claude's reading: {prose(diagnosis.narrative, 900)}")
    for check in diagnosis.rule_findings:
        if check.id not in by_id:
            notes.append(f"dropped: Claude's verdict on `{check.id}`, which the rules did not report")
        elif check.verdict == "reject":
            good = [ev for ev in check.evidence if verifier.check(ev) is None]
            if good:
                cites = "; ".join(prose(ev.cite(), 160) for ev in good[:2])
                notes.append(f"Claude disputes `{check.id}` (the finding stays): {prose(check.why, 300)} Evidence: {cites}")
            else:
                notes.append(f"dropped: Claude disputed `{check.id}` without evidence that checks out")
    added: list[Finding] = []
    for extra in diagnosis.extra_findings:
        if extra.id in RULES_ONLY:
            notes.append(f"dropped: Claude's `{extra.id}` (whether the run is alive, down or done is the rules' call)")
            continue
        if extra.id in by_id:
            continue  # the rules found it too
        checked = [(ev, verifier.check(ev)) for ev in extra.evidence]
        good = [ev for ev, problem in checked if problem is None]
        if not good:
            notes.append(f"dropped: Claude's `{extra.id}`, no evidence checks out ({prose(checked[0][1], 160)})")
            continue
        added_finding = finding(
            id=extra.id,
            severity=Severity(extra.severity),
            summary=prose(extra.summary, 240),
            evidence=[prose(ev.cite(), 300) for ev in good],
            first_step=extra.first_step,
            last_step=extra.last_step,
            source="llm",
        )
        by_id[added_finding.id] = added_finding
        added.append(added_finding)
    out = dict(update)
    if added:
        plain = [f.model_copy(update={"since": None, "checkins": 1}) for f in [*findings, *added]]
        out["findings"], out["remembered"] = with_persistence(plain, earlier, state.out.observation.now)
        if update.get("health") is Health.HEALTHY and any(f.severity is Severity.WARNING for f in added):
            out["health"] = Health.DEGRADED
    choice = diagnosis.proposal
    rules_proposal: Proposal | None = update.get("proposal")
    if choice is not None:
        ctx = RuleContext.from_state(applied(state, out), thresholds)
        built, why_not = to_proposal(choice, ctx, by_id)
        what = built.headline() if built else f"{choice.action.value} ({why_not})"
        if rules_proposal is not None and built is not None and same_action(built, rules_proposal):
            notes.append(f"Claude agrees with the rules' proposal ({what})")
        else:
            notes.append(
                f"Claude's choice, advisory (the rules' proposal is what goes to review): {what}, "
                f"for {', '.join(choice.addresses)}. Its reason: {prose(choice.why, 300)}"
            )
    elif rules_proposal is not None:
        notes.append("Claude proposed no action; the rules' proposal goes to review")
    return out


def to_proposal(
    choice: ActionChoice, ctx: RuleContext, by_id: dict[str, Finding], revision: int = 0
) -> tuple[Proposal | None, str]:
    """A typed proposal built by rlagent from Claude's choice, or (None, why not). The claim, the
    checkpoint and the current values come from rlagent's own reading of the run."""
    missing = [i for i in choice.addresses if i not in by_id]
    if missing:
        return None, f"{', '.join(missing)} not among this check-in's findings"
    primary = by_id[choice.addresses[0]]
    wanted = STOP_FOR if choice.action is ActionKind.STOP else DOWN
    if primary.id not in wanted or primary.severity is not Severity.CRITICAL:
        return None, f"a {choice.action.value} answers a critical {' or '.join(wanted)}, not {primary.id}"
    if choice.action is ActionKind.STOP and choice.overrides:
        return None, "a stop carries no overrides"
    if choice.action is ActionKind.RESTART_WITH_OVERRIDES and not choice.overrides:
        return None, "restart_with_overrides without overrides"
    claim = {
        "run_crashed": lambda: crash_claim(ctx),
        "process_down": lambda: process_claim(ctx),
        "nan_detected": lambda: nan_claim(ctx),
        "run_stalled": lambda: _stall_claim(ctx),
    }[primary.id]()
    if claim is None:
        return None, f"no claim rlagent can check on disk backs {primary.id}"
    overrides: list[Override] = []
    for o in choice.overrides:
        spec = KNOBS[o.knob]
        current = getattr(ctx.config, spec.config_field) if spec.config_field else None
        try:
            overrides.append(Override(knob=o.knob, value=o.value, current=current))
        except ValidationError as exc:
            return None, f"override {o.knob.value}: {exc.errors()[0]['msg']}"
    action = choice.action
    if action is ActionKind.RESTART and overrides:
        action = ActionKind.RESTART_WITH_OVERRIDES
    resume = None
    rationale = f"{primary.id}: {primary.summary}. Chosen by Claude from the closed set of actions; rlagent built the claim"
    if action is not ActionKind.STOP:
        resume = newest_complete(ctx.observation.checkpoints)
        if resume is None:
            return None, "no complete checkpoint to resume from"
        rationale += f", and resumes from checkpoint step {resume}, the newest complete one"
    proposal = Proposal(
        action=action,
        addresses=list(dict.fromkeys(choice.addresses)),
        claim=claim,
        rationale=rationale + ".",
        resume_step=resume,
        overrides=overrides,
        revision=revision,
    )
    return proposal, ""


def same_action(a: Proposal, b: Proposal) -> bool:
    """The same kind, primary finding and overrides (knob and value)."""

    def overrides(p: Proposal) -> list[tuple[str, float]]:
        return sorted((o.knob.value, o.value) for o in p.overrides)

    return a.action is b.action and a.addresses[:1] == b.addresses[:1] and overrides(a) == overrides(b)


def _stall_claim(ctx: RuleContext) -> StallClaim | None:
    process = "trainer" if ctx.last_step("trainer") is not None else "orchestrator"
    last = ctx.last_step(process)
    return StallClaim(process=process, last_step=last) if last is not None else None


# --- revision ------------------------------------------------------------------------------


def revise_with_claude(
    state: CheckinState,
    ruled: tuple[Proposal | None, list[str]],
    runtime: LLMRuntime,
    thresholds: Thresholds,
) -> dict[str, Any]:
    """After a rejection: the rules' withdrawal is final (Claude is not asked); otherwise Claude
    may withdraw the proposal, or the rules' revision goes to review again."""
    proposal, notes = ruled
    update: dict[str, Any] = {"proposal": proposal, "proposal_notes": [*state.out.proposal_notes, *notes]}
    session = runtime.session(state)
    if session is None or proposal is None:
        return update if session is None else {**update, **runtime.record(state, session)}
    review = state.out.reviews[-1]
    try:
        answer = ask(
            session,
            runtime.settings,
            role=ROLE,
            prompt=render("llm_revision.j2", review=review, now=state.out.observation.now if state.out.observation else None),
            tool="report_revision",
            model=Revision,
        )
        update = revision_update(state, review, answer.value, update, thresholds)
    except LLMError as exc:
        session.failed(ROLE, exc)
    except Exception as exc:  # rule 5, as in refine()
        logger.exception("the LLM revision failed; going on with the rules' revision")
        session.failed(ROLE, LLMError(f"internal error ({type(exc).__name__}: {prose(exc, 120)})"))
    return {**update, **runtime.record(applied(state, update), session)}


def revision_update(
    state: CheckinState, review: Review, revision: Revision, update: dict[str, Any], thresholds: Thresholds
) -> dict[str, Any]:
    """Claude's withdrawal ends the proposal; otherwise the rules' revision stands (Claude's
    own revised choice is a note, as in the first round)."""
    notes = list(update["proposal_notes"])
    if revision.decision == "withdraw":
        notes.append(f"Claude withdrew the proposal after review round {review.round}: {prose(revision.why, 300)}")
        return {"proposal": None, "proposal_notes": notes}
    assert revision.proposal is not None
    ctx = RuleContext.from_state(state, thresholds)
    built, why_not = to_proposal(revision.proposal, ctx, {f.id: f for f in state.out.findings}, review.proposal.revision + 1)
    what = built.headline() if built else f"{revision.proposal.action.value} ({why_not})"
    notes.append(f"Claude would revise to {what}; the rules' revision goes to review. Its reason: {prose(revision.why, 300)}")
    return {**update, "proposal_notes": notes}
