"""Performance rules: who waits on whom, inference pressure, slowing steps, stale rollouts.

Trainer and orchestrator step independently, so each one's waiting time says whether the
other is the bottleneck (prime-rl training docs).
"""

from __future__ import annotations

from functools import partial

from rlagent.agents.rules.catalogue import finding
from rlagent.agents.rules.context import (
    Point,
    RuleContext,
    cite_events,
    fmt,
    pct,
    points_evidence,
    streak_vs_reference,
    times,
    trailing,
)
from rlagent.models.findings import Finding
from rlagent.models.observation import Process
from rlagent.models.run import Severity

# vLLM renamed the gauge; modern servers only expose the first (prime-rl-formats.md section 8).
KV_USAGE_KEYS = ("vllm:kv_cache_usage_perc", "kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "gpu_cache_usage_perc")
WAITING_KEYS = ("vllm:num_requests_waiting", "num_requests_waiting")


def _wait_share(ctx: RuleContext, process: Process, wait: str) -> list[Point]:
    """(step, wait / step time) after warm-up: the first batch and the first policy are waited
    for by design."""
    return ctx.derived(process, ("wait_share", wait), partial(_share_of, wait), after_warmup=True)


def _share_of(wait: str, _step: int, row: dict[str, float]) -> float | None:
    total, waited = row.get("step_time"), row.get(wait)
    return waited / total if total and waited is not None and total > 0 and waited >= 0 else None


def _bottleneck(ctx: RuleContext, finding_id: str, process: Process, wait: str, other: str) -> Finding | None:
    t = ctx.thresholds
    streak = trailing(_wait_share(ctx, process, wait), lambda v: v > t.wait_ratio_high)
    if len(streak) < t.sustain_steps:
        return None
    s, share = streak[-1]
    row = ctx.history.table(process)[s]
    mean = sum(v for _, v in streak) / len(streak)
    return finding(
        id=finding_id,
        severity=Severity.WARNING,
        summary=(
            f"{process} waited {fmt(row[wait])}s of its {fmt(row['step_time'])}s step ({pct(share)}) at step {s}, "
            f"above {pct(t.wait_ratio_high)} for {len(streak)} steps (mean {pct(mean)}): the {other} is the bottleneck"
        ),
        evidence=points_evidence(f"{process} {wait}/step_time", streak),
        first_step=streak[0][0],
        last_step=s,
    )


def orchestrator_bottleneck(ctx: RuleContext) -> Finding | None:
    return _bottleneck(ctx, "orchestrator_bottleneck", "trainer", "wait_for_batch", "orchestrator (rollouts)")


def trainer_bottleneck(ctx: RuleContext) -> Finding | None:
    return _bottleneck(ctx, "trainer_bottleneck", "orchestrator", "wait_for_policy", "trainer")


def kv_cache_saturated(ctx: RuleContext) -> Finding | None:
    """vLLM's KV cache full with requests queueing (live check-ins only)."""
    vllm = ctx.observation.live.vllm
    if not vllm:
        return None
    usage_key = next((k for k in KV_USAGE_KEYS if k in vllm), None)
    waiting_key = next((k for k in WAITING_KEYS if k in vllm), None)
    if usage_key is None or waiting_key is None:
        return None
    usage, waiting = vllm[usage_key], vllm[waiting_key]
    if usage > 1:
        usage /= 100  # vLLM's `_perc` gauges are fractions; above 1 can only be a percentage
    if usage < ctx.thresholds.kv_cache_high or waiting < 1:
        return None
    return finding(
        id="kv_cache_saturated",
        severity=Severity.WARNING,
        summary=(
            f"vLLM KV cache {pct(usage)} full with {waiting:.0f} requests waiting "
            f"(limit {pct(ctx.thresholds.kv_cache_high)}): generation is memory-bound"
        ),
        evidence=[f"{usage_key} = {fmt(vllm[usage_key])} (live)", f"{waiting_key} = {fmt(waiting)} (live)"],
        last_step=ctx.last_step("orchestrator"),
    )


def step_time_regression(ctx: RuleContext) -> Finding | None:
    """Trainer or orchestrator step time above 1.5 x the median of the steps before the
    slowdown, for k steps (checkpoint and eval steps are single-step and do not count)."""
    t = ctx.thresholds
    parts, evidence, firsts, lasts = [], [], [], []
    for process in ("trainer", "orchestrator"):
        points = ctx.series(process, "step_time", after_warmup=True)
        found = streak_vs_reference(
            points, t.step_time_ratio, below=False, window=t.rolling_window, min_ref=t.min_baseline_points
        )
        if found is None or len(found[0]) < t.sustain_steps:
            continue
        streak, ref = found
        s, v = streak[-1]
        parts.append(
            f"{process} step {fmt(v)}s at step {s}, {times(v / ref)} its median {fmt(ref)}s before step "
            f"{streak[0][0]}, above {fmt(t.step_time_ratio)}x for {len(streak)} steps"
        )
        evidence += points_evidence(f"{process} step_time", streak)
        firsts.append(streak[0][0])
        lasts.append(s)
    if not parts:
        return None
    return finding(
        id="step_time_regression",
        severity=Severity.WARNING,
        summary="; ".join(parts),
        evidence=evidence,
        first_step=min(firsts),
        last_step=max(lasts),
    )


def off_policy_drops(ctx: RuleContext) -> Finding | None:
    """Rollouts thrown away as too stale, on several recent steps and more than in the steps
    before: inference is falling behind the trainer. A few drops now and then are normal."""
    t = ctx.thresholds
    window = t.event_window_steps
    recent = ctx.recent_events(["off_policy_drop"], window)
    before = [e for e in ctx.recent_events(["off_policy_drop"], 2 * window) if e not in recent]
    on_steps = {e.step for e in recent if e.step is not None}
    dropped = sum(e.numbers[0] for e in recent if e.numbers)
    dropped_before = sum(e.numbers[0] for e in before if e.numbers)
    if len(on_steps) < t.off_policy_min_steps or dropped <= dropped_before:
        return None
    limit = f" (max_off_policy_steps={ctx.config.max_off_policy_steps})" if ctx.config.max_off_policy_steps else ""
    steps = sorted(on_steps)
    return finding(
        id="off_policy_drops",
        severity=Severity.WARNING,
        summary=(
            f"off-policy drops growing: {dropped:.0f} rollouts dropped on {len(on_steps)} of the last {window} steps, "
            f"{dropped_before:.0f} in the {window} before{limit}"
        ),
        evidence=cite_events(recent),
        first_step=steps[0],
        last_step=steps[-1],
    )


RULES = (
    orchestrator_bottleneck,
    trainer_bottleneck,
    kv_cache_saturated,
    step_time_regression,
    off_policy_drops,
)
