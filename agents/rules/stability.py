"""Stability rules (trainer side): is the optimisation numerically sane and on-policy enough.

Each series is judged against its own early-run median or the rolling median of the steps
before, and a condition must hold over several consecutive steps.
"""

from __future__ import annotations

import math
import re
from functools import partial

from rlagent.agents.rules.catalogue import finding
from rlagent.agents.rules.context import (
    RuleContext,
    cite_events,
    fmt,
    median,
    noise_sd,
    pct,
    point,
    points_evidence,
    theil_sen_slope,
    times,
    trailing,
)
from rlagent.models.findings import Finding
from rlagent.models.observation import Process
from rlagent.models.run import Severity

# NaN here poisons the update. A NaN reference KL is not listed: it is NaN by design when the
# KL term is off (TRL `kl = nan` with beta = 0), a normal thing that looks alarming.
NAN_METRICS: tuple[tuple[Process, str], ...] = (
    ("trainer", "loss"),
    ("trainer", "entropy"),
    ("trainer", "mismatch_kl"),
    ("trainer", "grad_norm"),
    ("orchestrator", "reward"),
)
# metrics.jsonl keys of the same metrics, as listed in `Dropping N non-finite value(s) ...: a, b`.
_CORE_KEY = re.compile(r"^(?:loss/|entropy/|mismatch_kl/|optim/grad_norm$|.*/reward/mean$)")


def _dropped_core(message: str) -> bool:
    """Does a `Dropping N non-finite value(s) from metrics.jsonl: k1, k2 ...` line concern a
    metric that matters? No key list counts as yes. A list of other keys only (a std over one
    sample, a KL term that is off) as no, even when cut with `...`: the core metrics also have
    step lines, which the history reads, so a NaN among the hidden keys is seen there."""
    _, _, listed = message.partition("metrics.jsonl:")
    keys = [k.strip() for k in listed.replace("...", "").split(",") if k.strip()]
    return not keys or any(_CORE_KEY.match(k) for k in keys)


def _nonfinite(metric: str, _step: int, row: dict[str, float]) -> float | None:
    value = row.get(metric)
    return value if value is not None and not math.isfinite(value) else None


def nan_detected(ctx: RuleContext) -> Finding | None:
    bad = [
        (s, metric, v)
        for process, metric in NAN_METRICS
        for s, v in ctx.derived(process, ("nonfinite", metric), partial(_nonfinite, metric))
    ]
    dropped = [e for e in ctx.of_kind("nonfinite_dropped") if _dropped_core(e.message)]
    if not bad and not dropped:
        return None
    bad.sort()
    parts = []
    if bad:
        s, metric, v = bad[0]
        metrics = sorted({m for _, m, _ in bad})
        parts.append(f"{metric} = {v} at step {s} ({len(bad)} non-finite values of {', '.join(metrics)})")
    if dropped:
        parts.append(f"{len(dropped)} `Dropping non-finite value(s)` line(s) in the logs")
    steps = [s for s, _, _ in bad] + [e.step for e in dropped if e.step is not None]
    return finding(
        id="nan_detected",
        severity=Severity.CRITICAL,
        summary="; ".join(parts),
        evidence=[point(m, s, v) for s, m, v in bad[:4]] + cite_events(dropped, 3),
        first_step=min(steps) if steps else None,
        last_step=max(steps) if steps else None,
    )


def entropy_collapse(ctx: RuleContext) -> Finding | None:
    """Entropy below 10 % of its early median, or below 0.05 absolute, sustained. The absolute
    floor only applies to a run that started at least twice above it: a model that starts
    confident is not collapsing."""
    t = ctx.thresholds
    early = ctx.early("trainer", "entropy")
    points = ctx.series("trainer", "entropy")
    if early is None and points and points[0][0] > t.early_steps and len(points) >= t.sustain_steps:
        # The history starts late (an excerpt, a run watched from the middle): the early value is
        # unknown, so findings.md's absolute threshold is the only one that can be judged.
        def collapsed_abs(v: float) -> bool:
            return v < t.entropy_collapse_abs

        streak = trailing(points, collapsed_abs)
        if len(streak) < t.sustain_steps:
            return None
        s, v = streak[-1]
        return finding(
            id="entropy_collapse",
            severity=Severity.WARNING,
            summary=(
                f"entropy {fmt(v)} at step {s}, below {fmt(t.entropy_collapse_abs)} for {len(streak)} steps "
                f"(the run's early entropy is not in the history, so only the absolute threshold applies)"
            ),
            evidence=points_evidence("entropy", streak),
            first_step=streak[0][0],
            last_step=s,
        )
    if early is None or early <= 0:
        return None
    use_abs = early >= 2 * t.entropy_collapse_abs

    def collapsed(v: float) -> bool:
        return v < t.entropy_collapse_ratio * early or (use_abs and v < t.entropy_collapse_abs)

    streak = trailing(ctx.series("trainer", "entropy"), collapsed)
    if len(streak) < t.sustain_steps:
        return None
    s, v = streak[-1]
    line = f"{pct(t.entropy_collapse_ratio)} of it" + (f" or {fmt(t.entropy_collapse_abs)}" if use_abs else "")
    return finding(
        id="entropy_collapse",
        severity=Severity.WARNING,
        summary=(
            f"entropy {fmt(v)} at step {s}, {pct(v / early)} of its early median {fmt(early)}, "
            f"below {line} for {len(streak)} steps"
        ),
        evidence=points_evidence("entropy", streak),
        first_step=streak[0][0],
        last_step=s,
    )


def entropy_explosion(ctx: RuleContext) -> Finding | None:
    """Entropy above 2 x its early median for k steps and still rising: the rise over the last
    window must exceed 3 x the step-to-step noise (a plateau is not rising)."""
    t = ctx.thresholds
    early = ctx.early("trainer", "entropy")
    if early is None or early <= 0:
        return None
    points = ctx.series("trainer", "entropy")
    streak = trailing(points, lambda v: v > t.entropy_explosion_ratio * early)
    if len(streak) < t.sustain_steps:
        return None
    window = points[-max(2 * t.sustain_steps, t.rolling_window) :]
    rise = theil_sen_slope(window) * (window[-1][0] - window[0][0])
    if rise <= 3 * noise_sd([v for _, v in window]):
        return None
    s, v = streak[-1]
    return finding(
        id="entropy_explosion",
        severity=Severity.WARNING,
        summary=(
            f"entropy {fmt(v)} at step {s}, {times(v / early)} its early median {fmt(early)}, above "
            f"{fmt(t.entropy_explosion_ratio)}x for {len(streak)} steps and still rising "
            f"(+{fmt(rise)} since step {window[0][0]})"
        ),
        evidence=points_evidence("entropy", streak),
        first_step=streak[0][0],
        last_step=s,
    )


def mismatch_kl_growth(ctx: RuleContext) -> Finding | None:
    """Trainer-vs-inference KL above 10 x its early median (and an absolute floor) for k steps:
    the early warning of off-policy collapse."""
    t = ctx.thresholds
    early = ctx.early("trainer", "mismatch_kl")
    if early is None:
        return None
    line = max(t.mismatch_kl_ratio * early, t.mismatch_kl_floor)
    streak = trailing(ctx.series("trainer", "mismatch_kl"), lambda v: v > line)
    if len(streak) < t.sustain_steps:
        return None
    s, v = streak[-1]
    multiple = f"{times(v / early)} its early median {fmt(early)}" if early > 0 else f"early median {fmt(early)}"
    return finding(
        id="mismatch_kl_growth",
        severity=Severity.WARNING,
        summary=f"mismatch KL {fmt(v)} at step {s}, {multiple}, above {fmt(line)} for {len(streak)} steps",
        evidence=points_evidence("mismatch_kl", streak),
        first_step=streak[0][0],
        last_step=s,
    )


def grad_norm_spike(ctx: RuleContext) -> Finding | None:
    """Grad norm above 10 x the rolling median of the previous steps on >= 2 consecutive steps,
    within the recent steps. One-step excursions of a few x are normal RL noise."""
    t = ctx.thresholds
    points = ctx.series("trainer", "grad_norm")
    values = [v for _, v in points]
    last = points[-1][0] if points else 0
    # Runs of spikes, read back from the newest step: only runs that end within the recent steps
    # count, so the first step without a spike before them ends the search.
    runs: list[list[tuple[int, float, float]]] = []
    current: list[tuple[int, float, float]] = []
    for i in range(len(points) - 1, -1, -1):
        s, v = points[i]
        before = values[max(0, i - t.rolling_window) : i]
        ref = median(before) if len(before) >= t.min_baseline_points else None
        if s > t.warmup_steps and ref is not None and ref > 0 and v > t.grad_spike_ratio * ref:
            current.append((s, v, ref))
            continue
        if current:
            runs.append(current[::-1])
        current = []
        if s <= last - t.recent_steps:
            break
    if current:
        runs.append(current[::-1])
    runs = [r for r in reversed(runs) if len(r) >= t.grad_spike_steps and r[-1][0] > last - t.recent_steps]
    if not runs:
        return None
    run = runs[-1]
    peak_step, peak, ref = max(run, key=lambda x: x[1] / x[2])
    others = f" ({len(runs)} such spikes in the last {t.recent_steps} steps)" if len(runs) > 1 else ""
    return finding(
        id="grad_norm_spike",
        severity=Severity.WARNING,
        summary=(
            f"grad norm {fmt(peak)} at step {peak_step}, {times(peak / ref)} its rolling median {fmt(ref)}, "
            f"above {fmt(t.grad_spike_ratio)}x for {len(run)} steps ({run[0][0]}-{run[-1][0]}){others}"
        ),
        evidence=[
            *(point("grad_norm", s, v) for s, v, _ in run[:4]),
            f"rolling median before step {run[0][0]} = {fmt(run[0][2])}",
        ],
        first_step=run[0][0],
        last_step=run[-1][0],
    )


def kl_blowup(ctx: RuleContext) -> Finding | None:
    """Reference KL above 10, or 100 x its early median (floored: KL to the reference starts
    at 0 and grows by design), for a few consecutive steps."""
    t = ctx.thresholds
    points = ctx.series("trainer", "ref_kl")
    if not points:
        return None
    early = ctx.early("trainer", "ref_kl")
    base = max(early or 0.0, t.kl_early_floor)
    line = min(t.kl_blowup_abs, t.kl_blowup_ratio * base)
    streak = trailing(points, lambda v: v > line)
    if len(streak) < t.kl_blowup_steps:
        return None
    s, v = streak[-1]
    return finding(
        id="kl_blowup",
        severity=Severity.CRITICAL,
        summary=(
            f"reference KL {fmt(v)} at step {s}, above {fmt(line)} for {len(streak)} steps "
            f"(early median {fmt(early) if early is not None else 'unknown'})"
        ),
        evidence=points_evidence("ref_kl", streak),
        first_step=streak[0][0],
        last_step=s,
    )


RULES = (
    nan_detected,
    kl_blowup,
    entropy_collapse,
    entropy_explosion,
    mismatch_kl_growth,
    grad_norm_spike,
)
