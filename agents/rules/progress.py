"""Progress rules (orchestrator side): is the policy still learning from useful rollouts.

Reward is the noisiest series of all, so its rules compare levels (means over several steps)
and demand that a change exceed the series' own step-to-step noise, never one step's value.
"""

from __future__ import annotations

import itertools
import math
import statistics

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
    streak_vs_reference,
    theil_sen_slope,
    trailing,
    trailing_by,
    trailing_medians,
)
from rlagent.models.findings import Finding
from rlagent.models.run import Severity


def reward_flat(ctx: RuleContext) -> Finding | None:
    """Info: after warm-up, the reward level now is no higher than `reward_flat_steps` steps ago.

    The mean of the last block (half the window, shorter in a short run) is compared with the mean
    of the block that ended `reward_flat_steps` steps earlier: improving if it is higher by more than two standard errors.
    (Comparing best levels would not do: the best of fifty noisy levels nearly always beats the
    best of ten, so a flat run would look like it kept improving.)
    """
    t = ctx.thresholds
    n = t.reward_flat_steps
    points = ctx.series("orchestrator", "reward", after_warmup=True)
    block = min(n // 2, len(points) - n)  # a shorter run compares shorter blocks, down to 10 steps
    if block < 10:
        return None
    now_points, then_points = points[-block:], points[-n - block : -n]
    now = statistics.fmean(v for _, v in now_points)
    then = statistics.fmean(v for _, v in then_points)
    se_diff = noise_sd([v for _, v in points[-n - block :]]) * math.sqrt(2 / block)
    if now - then > 2 * se_diff:
        return None
    start, end = then_points[-1][0], now_points[-1][0]
    return finding(
        id="reward_flat",
        severity=Severity.INFO,
        summary=(
            f"reward has not improved for {end - start} steps: {block}-step mean {fmt(now)} at step {end} vs "
            f"{fmt(then)} at step {start} (within 2 standard errors, {fmt(2 * se_diff)})"
        ),
        evidence=[point(f"reward ({block}-step mean)", start, then), point(f"reward ({block}-step mean)", end, now)],
        first_step=start,
        last_step=end,
    )


def reward_regression(ctx: RuleContext) -> Finding | None:
    """The reward level fell > 20 % below its peak and stayed there for >= 10 steps. The drop
    must also exceed `noise_z` standard errors: the peak of a noisy series is partly noise."""
    t = ctx.thresholds
    w, k = t.reward_smooth_steps, t.reward_regression_steps
    levels = ctx.window_means("orchestrator", "reward", w)  # (step, mean of the w values ending there)
    if len(levels) <= k:
        return None
    values = [v for _, v in levels]
    peak = max(values[:-k])
    peak_step = levels[values.index(peak)][0]  # the first step at the peak, as max() finds it
    scale = max(abs(peak), peak - min(values))
    if scale <= 0:
        return None
    noise = t.noise_z * ctx.series_noise("orchestrator", "reward") * math.sqrt(2 / w)
    line = peak - max(t.reward_regression_drop * scale, noise)
    streak = trailing(levels, lambda v: v < line)
    if len(streak) < k:
        return None
    now_step, now = streak[-1]
    return finding(
        id="reward_regression",
        severity=Severity.WARNING,
        summary=(
            f"reward {w}-step mean {fmt(now)} at step {now_step}, {pct((peak - now) / scale)} below its peak "
            f"{fmt(peak)} at step {peak_step}, below {fmt(line)} for {len(streak)} steps (keep the peak checkpoint)"
        ),
        evidence=[point(f"reward ({w}-step mean)", peak_step, peak), *points_evidence(f"reward ({w}-step mean)", streak)],
        first_step=streak[0][0],
        last_step=now_step,
    )


def reward_constant(ctx: RuleContext) -> Finding | None:
    """Every rollout scores the same (all 0, all 1): GRPO advantages are all zero. Seen as
    reward min == max per step, or, when only the mean is logged, the mean not moving at all
    (a mean of hundreds of rollouts repeats exactly only if every rollout scores the same)."""
    t = ctx.thresholds
    k, eps = t.reward_constant_steps, t.reward_constant_eps
    table = ctx.history.orchestrator
    points = ctx.series("orchestrator", "reward")  # the steps with a finite reward
    if len(points) < k:
        return None
    recent = [table[s] for s, _ in points[-k:]]
    if all("reward_min" in r and "reward_max" in r for r in recent):
        # a row without them (logged before they were) ends the run of equal ones
        def spread(step: int) -> float:
            return table[step].get("reward_max", math.nan) - table[step].get("reward_min", math.nan)

        streak = trailing_by(points, spread, lambda v: v <= eps)
        how = "reward min = max"
    elif all(math.isfinite(r.get("reward_std", math.nan)) for r in recent):
        # TRL `reward_std`, OpenRLHF `rollout/reward_std`: the batch's reward std is 0 only when
        # every rollout scores the same (findings.md: "reward std ~ 0")
        streak = trailing_by(points, lambda s: table[s].get("reward_std", math.nan), lambda v: v <= eps)
        how = "reward std 0"
    else:
        last = points[-1][1]
        streak = trailing_by(points, lambda s: table[s]["reward"], lambda v: abs(v - last) <= eps)
        how = "reward mean unchanged"
    if len(streak) < k:
        return None
    value = table[streak[-1][0]]["reward"]
    return finding(
        id="reward_constant",
        severity=Severity.WARNING,
        summary=(
            f"every rollout gets the same reward {fmt(value)} for {len(streak)} steps "
            f"(steps {streak[0][0]}-{streak[-1][0]}, {how}): no learning signal"
        ),
        evidence=points_evidence("reward", [(s, table[s]["reward"]) for s, _ in streak]),
        first_step=streak[0][0],
        last_step=streak[-1][0],
    )


def zero_advantage(ctx: RuleContext) -> Finding | None:
    """Trainable fraction below 25 % for k steps: groups whose rollouts all score alike carry
    no advantage, so most of the batch teaches nothing."""
    t = ctx.thresholds
    k = t.sustain_steps
    streak = trailing(ctx.series("orchestrator", "trainable"), lambda v: v < t.zero_adv_trainable)
    if len(streak) >= k:
        s, v = streak[-1]
        mean = sum(x for _, x in streak) / len(streak)
        return finding(
            id="zero_advantage",
            severity=Severity.WARNING,
            summary=(
                f"trainable {pct(v)} at step {s}, below {pct(t.zero_adv_trainable)} for {len(streak)} steps "
                f"(mean {pct(mean)}): most groups have zero reward variance"
            ),
            evidence=points_evidence("trainable", streak),
            first_step=streak[0][0],
            last_step=s,
        )
    # Without the metric: `Only k/n effective traces are trainable` warnings on each recent step.
    low = [
        e
        for e in ctx.recent_events(["few_trainable"], k)
        if len(e.numbers) >= 2 and e.numbers[1] > 0 and e.numbers[0] / e.numbers[1] < t.zero_adv_trainable
    ]
    steps = sorted({e.step for e in low if e.step is not None})
    if len(steps) < k:
        return _zero_advantage_from_pinned_reward(ctx)
    newest = low[-1]
    return finding(
        id="zero_advantage",
        severity=Severity.WARNING,
        summary=(
            f"only {int(newest.numbers[0])}/{int(newest.numbers[1])} traces trainable at step {newest.step}, "
            f"below {pct(t.zero_adv_trainable)} on each of the last {len(steps)} steps"
        ),
        evidence=cite_events(low),
        first_step=steps[0],
        last_step=steps[-1],
    )


def _zero_advantage_from_pinned_reward(ctx: RuleContext) -> Finding | None:
    """Neither a trainable fraction nor the warning (layout L logs neither): a reward mean pinned at
    exactly 0 or 1 means every rollout scored the bound (rewards lie in [0, 1]), so every group has
    zero variance and nothing is trainable. Only when the run's rewards stay within [0, 1]."""
    t = ctx.thresholds
    points = ctx.series("orchestrator", "reward")
    if ctx.series("orchestrator", "trainable") or not points or any(v < 0 or v > 1 for _, v in points):
        return None
    pinned = trailing(points, lambda v: v <= t.reward_constant_eps or v >= 1 - t.reward_constant_eps)
    if len(pinned) < t.sustain_steps or len({round(v) for _, v in pinned}) != 1:
        return None
    s, v = pinned[-1]
    return finding(
        id="zero_advantage",
        severity=Severity.WARNING,
        summary=(
            f"reward mean pinned at {fmt(v)} for {len(pinned)} steps (to step {s}): every rollout scores the same, "
            "so every group has zero advantage and nothing is trainable"
        ),
        evidence=points_evidence("reward", pinned),
        first_step=pinned[0][0],
        last_step=s,
    )


def truncation_high(ctx: RuleContext) -> Finding | None:
    """Over half the samples hit the length cap for k steps, or truncation climbing so fast
    that it reaches 100 % within `truncation_trend_horizon` steps."""
    t = ctx.thresholds
    points = ctx.series("orchestrator", "truncation")
    # The median of the last k steps, not every single step: a per-step fraction of a few dozen
    # rollouts (k/16 in layout L) jitters around 50 % while the run is plainly over it.
    k = t.sustain_steps
    streak = trailing_medians(points, k, lambda v: v > t.truncation_high)
    if len(streak) >= k:
        s, v = streak[-1]
        raw = [p for p in points if streak[0][0] - k < p[0] <= s]
        return finding(
            id="truncation_high",
            severity=Severity.WARNING,
            summary=(
                f"truncation {pct(points[-1][1])} at step {s}, its {k}-step median above {pct(t.truncation_high)} "
                f"for {len(streak)} steps (now {pct(v)})"
            ),
            evidence=points_evidence("truncation", raw),
            first_step=raw[0][0],
            last_step=s,
        )
    window = points[-t.rolling_window :]
    if len(window) < t.rolling_window:
        return None
    current = median(v for _, v in window[-t.sustain_steps :])
    slope = theil_sen_slope(window)
    rise = slope * (window[-1][0] - window[0][0])
    if current < t.truncation_trend_floor or slope <= 0 or current + slope * t.truncation_trend_horizon < 1.0:
        return None
    if rise <= 3 * noise_sd([v for _, v in window]):
        return None
    return finding(
        id="truncation_high",
        severity=Severity.WARNING,
        summary=(
            f"truncation {pct(current)} at step {window[-1][0]} and rising {pct(slope)}/step "
            f"(from {pct(window[0][1])} at step {window[0][0]}): 100% within {t.truncation_trend_horizon} steps"
        ),
        evidence=points_evidence("truncation", window),
        first_step=window[0][0],
        last_step=window[-1][0],
    )


def length_collapse(ctx: RuleContext) -> Finding | None:
    """Mean length below 50 % of its rolling median before a sudden drop, for a few steps.
    A slow decline (a model learning to be concise) never halves against its recent median."""
    t = ctx.thresholds
    for metric in ("output_tokens", "seq_len"):
        points = ctx.series("orchestrator", metric, after_warmup=True)
        found = streak_vs_reference(
            points, t.length_collapse_ratio, below=True, window=t.rolling_window, min_ref=t.min_baseline_points
        )
        if found is None or len(found[0]) < t.length_collapse_steps:
            continue
        streak, ref = found
        s, v = streak[-1]
        return finding(
            id="length_collapse",
            severity=Severity.WARNING,
            summary=(
                f"{metric} {fmt(v)} at step {s}, {pct(v / ref)} of its median {fmt(ref)} before step "
                f"{streak[0][0]}; below {pct(t.length_collapse_ratio)} for {len(streak)} steps"
            ),
            evidence=points_evidence(metric, streak),
            first_step=streak[0][0],
            last_step=s,
        )
    return None


def length_explosion(ctx: RuleContext) -> Finding | None:
    """Mean length above 90 % of its cap for k steps: completion tokens against
    max_completion_tokens, sequence length against seq_len (it includes the prompt)."""
    t = ctx.thresholds
    completion_cap, cap_label = ctx.config.max_completion_tokens, "max_completion_tokens"
    if not completion_cap:
        # No config: truncated completions end at the cap, so while some are truncated the longest
        # completion logged (TRL completions/max_length, verl response_length/max) is the cap.
        table = ctx.history.orchestrator
        caps = [
            r["output_tokens_max"]
            for r in table.values()
            if r.get("truncation", 0) > 0 and math.isfinite(r.get("output_tokens_max", math.nan))
        ]
        if caps:
            completion_cap, cap_label = int(max(caps)), "the completion cap (longest truncated completion)"
    for metric, cap, cap_name in (
        ("output_tokens", completion_cap, cap_label),
        ("seq_len", ctx.config.seq_len, "seq_len"),
    ):
        if not cap:
            continue
        streak = trailing(ctx.series("orchestrator", metric), lambda v, cap=cap: v > t.length_explosion_ratio * cap)
        if len(streak) < t.sustain_steps:
            continue
        s, v = streak[-1]
        return finding(
            id="length_explosion",
            severity=Severity.WARNING,
            summary=(
                f"{metric} {fmt(v)} at step {s}, {pct(v / cap)} of {cap_name} {cap}, "
                f"above {pct(t.length_explosion_ratio)} for {len(streak)} steps"
            ),
            evidence=points_evidence(metric, streak),
            first_step=streak[0][0],
            last_step=s,
        )
    return None


def errored_rollouts_high(ctx: RuleContext) -> Finding | None:
    t = ctx.thresholds
    streak = trailing(ctx.series("orchestrator", "error"), lambda v: v > t.errored_high)
    if len(streak) < t.sustain_steps:
        return None
    s, v = streak[-1]
    mean = sum(x for _, x in streak) / len(streak)
    return finding(
        id="errored_rollouts_high",
        severity=Severity.WARNING,
        summary=(
            f"errored rollouts {pct(v)} at step {s}, above {pct(t.errored_high)} for {len(streak)} steps (mean {pct(mean)})"
        ),
        evidence=points_evidence("error", streak),
        first_step=streak[0][0],
        last_step=s,
    )


def empty_batches(ctx: RuleContext) -> Finding | None:
    """Any empty train batch in the recent steps; critical as the consecutive count nears the
    limit at which prime-rl raises."""
    t = ctx.thresholds
    recent = ctx.recent_events(["empty_batch"])
    if not recent:
        return None
    newest = recent[-1]
    consecutive = limit = None
    if len(newest.numbers) >= 3:
        consecutive, limit = int(newest.numbers[1]), int(newest.numbers[2])
    critical = consecutive is not None and limit and consecutive >= t.empty_batch_critical_ratio * limit
    count = f"{consecutive}/{limit} consecutive, " if consecutive is not None else ""
    steps = [e.step for e in recent if e.step is not None]
    return finding(
        id="empty_batches",
        severity=Severity.CRITICAL if critical else Severity.WARNING,
        summary=(
            f"empty train batches: {count}{len(recent)} in the last {t.event_window_steps} steps"
            + (f", newest after step {newest.step}" if newest.step is not None else "")
            + " (the orchestrator stops at the limit)"
        ),
        evidence=cite_events(recent),
        first_step=min(steps) if steps else None,
        last_step=max(steps) if steps else None,
    )


def eval_regression(ctx: RuleContext) -> Finding | None:
    """An eval score falling over 3 evals in a row while the train reward rises: overfitting."""
    t = ctx.thresholds
    n, w = t.eval_regression_evals, t.reward_smooth_steps
    rewards = ctx.series("orchestrator", "reward")
    if len(rewards) < w:
        return None
    noise = ctx.series_noise("orchestrator", "reward") * math.sqrt(2 / w)

    def level_at(step: int) -> float | None:
        window = [v for s, v in rewards if s <= step][-w:]
        return sum(window) / len(window) if len(window) >= max(t.min_baseline_points, w // 2) else None

    by_env: dict[str, dict[int, float]] = {}
    for e in ctx.history.evals:
        if math.isfinite(e.score):
            by_env.setdefault(e.env, {})[e.step] = e.score
    for env, scores in sorted(by_env.items()):
        last = sorted(scores.items())[-n:]
        if len(last) < n or not all(b[1] < a[1] for a, b in itertools.pairwise(last)):
            continue
        first_score, last_score = last[0][1], last[-1][1]
        if first_score - last_score < t.eval_regression_min_drop * abs(first_score):
            continue
        r0, r1 = level_at(last[0][0]), level_at(last[-1][0])
        if r0 is None or r1 is None or r1 - r0 <= 2 * noise:
            continue
        steps = ", ".join(str(s) for s, _ in last)
        return finding(
            id="eval_regression",
            severity=Severity.WARNING,
            summary=(
                f"eval {env} fell {fmt(first_score)} -> {fmt(last_score)} over the evals at steps {steps} "
                f"while the train reward rose {fmt(r0)} -> {fmt(r1)}: overfitting"
            ),
            evidence=[point(f"eval/{env}", s, v) for s, v in last]
            + [point(f"reward ({w}-step mean)", last[0][0], r0), point(f"reward ({w}-step mean)", last[-1][0], r1)],
            first_step=last[0][0],
            last_step=last[-1][0],
        )
    return None


RULES = (
    reward_regression,
    reward_constant,
    zero_advantage,
    truncation_high,
    length_collapse,
    length_explosion,
    errored_rollouts_high,
    empty_batches,
    eval_regression,
    reward_flat,
)
