"""Rules that turn a check-in's findings into at most one typed proposal, and revise it once.

A proposal is made only from evidence, and only of an action that can help:
- the run is down (a crash, a dead process) and a complete checkpoint exists -> restart;
  with a CUDA OOM -> restart with a smaller `seq_len` (the trainer packs micro-batches to it);
  with runaway truncation -> restart with more completion tokens;
- the run trains on NaN, or hangs -> stop (a restart can only come after it is down);
- never a restart for what a restart cannot fix (entropy collapse, reward hacking, KL blow-up...):
  those get a note for the researcher, not an action.
Anything not proposed is said in `notes`, so the entry explains the silence.
"""

from __future__ import annotations

import math

from rlagent.agents.rules.cluster import newest_job
from rlagent.agents.rules.context import SLURM_FAILED, RuleContext
from rlagent.models.actions import (
    KNOBS,
    ActionKind,
    Knob,
    LogClaim,
    MetricClaim,
    Override,
    ProcessClaim,
    Proposal,
    Review,
    SlurmClaim,
    StallClaim,
)
from rlagent.models.findings import Finding
from rlagent.models.run import RunConfig, Severity
from rlagent.tools.checkpoints import newest_complete

DOWN = ("run_crashed", "process_down")
"""Findings that mean the run is not training and a restart can bring it back."""
STOP_FOR = ("nan_detected", "run_stalled")
"""Findings for which continuing is waste: stop first, restart later."""
NOT_FIXED_BY_RESTART = frozenset(
    {
        "entropy_collapse",
        "entropy_explosion",
        "reward_flat",
        "reward_regression",
        "reward_constant",
        "zero_advantage",
        "eval_regression",
        "mismatch_kl_growth",
        "kl_blowup",
        "grad_norm_spike",
        "length_collapse",
        "length_explosion",
    }
)
"""Learning dynamics: resuming from a checkpoint replays them; a config change is a researcher's call."""
OVERRIDE_FOR = {"cuda_oom": (Knob.SEQ_LEN, -1), "truncation_high": (Knob.MAX_COMPLETION_TOKENS, +1)}
"""Finding -> the knob that addresses it and the direction it must move."""
SEQ_LEN_SHRINK = 0.75
COMPLETION_GROW = 1.5
PROMPT_ROOM = 256
"""Tokens kept free for the prompt when completion tokens and seq_len are set against each other."""
_TRAINER_NAN_METRICS = ("loss", "entropy", "grad_norm", "mismatch_kl")


def propose(ctx: RuleContext, findings: list[Finding]) -> tuple[Proposal | None, list[str]]:
    """(the proposal or None, notes on what was not proposed and why)."""
    by_id = {f.id: f for f in findings}
    if "run_finished" in by_id:
        return None, []
    down = [i for i in DOWN if _critical(by_id, i)]
    if down:
        notes = [
            f"`{f.id}`: a restart does not fix this (it resumes into the same dynamics); a config change for it "
            "is the researcher's call"
            for f in findings
            if f.id in NOT_FIXED_BY_RESTART and f.severity is not Severity.INFO
        ]
        proposal, more = _restart(ctx, by_id, down)
        return proposal, notes + more
    proposal, more = _stop(ctx, by_id)
    if proposal is None and "truncation_high" in by_id:
        grow = more_completion_tokens(ctx.config)
        if grow is not None:
            more.append(
                f"`truncation_high`: max_completion_tokens {grow.current:g} -> {grow.text()} would need a stop and a "
                "restart; rlagent proposes it once the run is down, not while it trains"
            )
    return proposal, more


def _critical(by_id: dict[str, Finding], finding_id: str) -> bool:
    finding = by_id.get(finding_id)
    return finding is not None and finding.severity is Severity.CRITICAL


def _restart(ctx: RuleContext, by_id: dict[str, Finding], down: list[str]) -> tuple[Proposal | None, list[str]]:
    alive = sorted({p.role for p in ctx.observation.live.processes or []} & {"Trainer", "Orchestrator"})
    if alive:
        return None, [
            f"the logs show the run down, but its {' and '.join(alive)} process is alive (a new attempt starting?): "
            "no restart proposed"
        ]
    if _critical(by_id, "nan_detected"):
        return None, ["the run is down after NaN values: a checkpoint may hold them; no restart proposed"]
    if _critical(by_id, "host_oom"):
        return None, ["the run was killed for host memory: the same restart would be killed again; no restart proposed"]
    job = newest_job(ctx)
    if job is not None and job.active:
        return None, [
            f"the logs show the run down, but its SLURM job {job.job_id} is {job.state}: no restart proposed while it holds "
            "its allocation"
        ]
    resume = newest_complete(ctx.observation.checkpoints)
    if resume is None:
        return None, [
            "no complete checkpoint (trainer/.metadata and orchestrator/progress.pt): a restart would start from "
            "step 1; none proposed"
        ]
    claim = crash_claim(ctx) if "run_crashed" in down else None
    primary = "run_crashed" if claim is not None else "process_down"
    if claim is None:
        claim = process_claim(ctx) if "process_down" in down else None
    if claim is None and job is not None and job.state in SLURM_FAILED and "run_crashed" in down:
        claim, primary = SlurmClaim(job_id=job.job_id, state=job.state), "run_crashed"
    if claim is None:
        return None, ["the run looks down but no claim can be checked on disk; no restart proposed"]
    addresses, overrides, notes = [primary], [], []
    if _critical(by_id, "cuda_oom"):
        shrink = smaller_seq_len(ctx.config)
        if shrink is None:
            return None, [
                "CUDA out of memory, and no smaller seq_len leaves room for the completion tokens; no restart "
                "proposed (activation checkpointing `--model.ac` is the researcher's call)"
            ]
        overrides.append(shrink)
        addresses.append("cuda_oom")
    if "truncation_high" in by_id:
        grow = more_completion_tokens(ctx.config)
        if grow is not None:
            overrides.append(grow)
            addresses.append("truncation_high")
        else:
            notes.append("`truncation_high`: max_completion_tokens cannot grow within seq_len; not part of the restart")
    action = ActionKind.RESTART_WITH_OVERRIDES if overrides else ActionKind.RESTART
    why = by_id[primary].summary
    rationale = f"{primary}: {why}. Resume from checkpoint step {resume}, the newest with both trainer and orchestrator state"
    if job is not None:  # a SLURM run: a new job of its own batch script, not a launch on this host
        action = ActionKind.RESUBMIT
        rationale += f"; resubmitted as a new SLURM job of the run's sbatch script (job {job.job_id} ended {job.state})"
    for override in overrides:
        finding = next(f for f, (knob, _) in OVERRIDE_FOR.items() if knob is override.knob)
        rationale += f"; {override.knob.value} {override.current:g} -> {override.text()} for {finding}"
    proposal = Proposal(
        action=action, addresses=addresses, claim=claim, rationale=rationale + ".", resume_step=resume, overrides=overrides,
        job_id=job.job_id if job is not None else None,
    )  # fmt: skip
    return proposal, notes


def _stop(ctx: RuleContext, by_id: dict[str, Finding]) -> tuple[Proposal | None, list[str]]:
    if _critical(by_id, "nan_detected"):
        claim = nan_claim(ctx)
        if claim is not None:
            return Proposal(
                action=ActionKind.STOP,
                addresses=["nan_detected"],
                claim=claim,
                rationale=f"nan_detected: {by_id['nan_detected'].summary}. Every further step trains on NaN and may "
                "overwrite good checkpoints.",
            ), []
    if _critical(by_id, "run_stalled"):
        process = "trainer" if ctx.last_step("trainer") is not None else "orchestrator"
        last = ctx.last_step(process)
        job = newest_job(ctx)
        running = job.job_id if job is not None and job.state == "RUNNING" else None
        if last is not None:
            return Proposal(
                action=ActionKind.STOP,
                addresses=["run_stalled"],
                claim=StallClaim(process=process, last_step=last),
                rationale=f"run_stalled: {by_id['run_stalled'].summary}. A hung run holds its GPUs; stop it so it can "
                "be restarted from its newest checkpoint" + (f" (scancel of its SLURM job {running})." if running else "."),
                job_id=running,
            ), []
    return None, []


# --- claims ------------------------------------------------------------------------------------


def crash_claim(ctx: RuleContext) -> LogClaim | None:
    """The crash line that tells the story best (`Fatal error in ...` first)."""
    events = sorted(ctx.crash_events, key=lambda e: (0 if "Fatal error in" in e.message else 1, e.line))
    for event in events:
        text = event.message.strip()[:200]
        if text:
            return LogClaim(file=event.file, line=event.line, text=text)
    return None


def process_claim(ctx: RuleContext) -> ProcessClaim | None:
    processes = ctx.observation.live.processes
    if processes is None:
        return None
    alive = {p.role for p in processes}
    expected = set(ctx.thresholds.required_roles) | {r for r in ctx.processes_seen if not r.startswith("EnvWorker")}
    missing = sorted(expected - alive)
    return ProcessClaim(missing=missing) if missing else None


def nan_claim(ctx: RuleContext) -> MetricClaim | None:
    bad = [
        (step, metric, value)
        for metric in _TRAINER_NAN_METRICS
        for step, value in ctx.history.series("trainer", metric)
        if not math.isfinite(value)
    ]
    if not bad:
        return None
    step, metric, value = max(bad)
    return MetricClaim(process="trainer", metric=metric, step=step, value=value)


# --- overrides ---------------------------------------------------------------------------------


def smaller_seq_len(config: RunConfig) -> Override | None:
    """seq_len x 0.75, rounded down to 256, keeping room for completion tokens and a prompt."""
    if config.seq_len is None:
        return None
    floor = max(KNOBS[Knob.SEQ_LEN].low, (config.max_completion_tokens or 0) + PROMPT_ROOM)
    value = int(config.seq_len * SEQ_LEN_SHRINK) // 256 * 256
    if value < floor or value >= config.seq_len:
        return None
    return Override(knob=Knob.SEQ_LEN, value=value, current=config.seq_len)


def more_completion_tokens(config: RunConfig) -> Override | None:
    """max_completion_tokens x 1.5, rounded to 64, within seq_len minus room for the prompt."""
    current = config.max_completion_tokens
    if current is None:
        return None
    value = int(math.ceil(current * COMPLETION_GROW / 64) * 64)
    if config.seq_len is not None:
        value = min(value, (config.seq_len - PROMPT_ROOM) // 64 * 64)
    value = min(value, int(KNOBS[Knob.MAX_COMPLETION_TOKENS].high))
    if value <= current:
        return None
    return Override(knob=Knob.MAX_COMPLETION_TOKENS, value=value, current=current)


# --- revision ----------------------------------------------------------------------------------

FIXABLE = frozenset({"override_range", "resume_step"})
"""Rejection reasons a rules diagnostician can answer by itself; any other ends the proposal."""


def revise(review: Review) -> tuple[Proposal | None, list[str]]:
    """One revision after a rejection: clamp overrides into range, move to the checkpoint the
    reviewers found; withdraw when a rejection is about anything else (evidence, safety, effect)."""
    failed = [(v.reviewer, c) for v in review.verdicts for c in v.reasons if not c.ok]
    unfixable = [f"{who}: {c.name}" for who, c in failed if c.name not in FIXABLE]
    if unfixable or not failed:
        return None, [f"proposal withdrawn after review round {review.round} ({'; '.join(unfixable) or 'no reason given'})"]
    proposal = review.proposal
    overrides = [_clamped(o) for o in proposal.overrides]
    resume = review.plan.resume_step if review.plan.resume_step is not None else proposal.resume_step
    revised = proposal.model_copy(
        update={
            "overrides": overrides,
            "resume_step": resume,
            "revision": proposal.revision + 1,
            "rationale": proposal.rationale + f" Revised after review round {review.round}.",
        }
    )
    return revised, []


def _clamped(override: Override) -> Override:
    spec = KNOBS[override.knob]
    low, high = spec.low, spec.high
    if override.current:
        low, high = max(low, override.current / spec.max_factor), min(high, override.current * spec.max_factor)
    value = min(max(override.value, low), high)
    if spec.integer:
        value = float(math.floor(value) if value < override.value else math.ceil(value))
    return override.model_copy(update={"value": value})
