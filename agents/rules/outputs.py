"""What the policy writes: degenerate completions, a format reward that was learnt and is lost, and
suspected reward hacking (a reward going up while correctness goes down), findings.md's progress ids
that look past the metrics at the samples and the reward's components."""

from __future__ import annotations

import itertools
import re

from rlagent.agents.rules.catalogue import finding
from rlagent.agents.rules.context import RuleContext, fmt, median, pct, point, points_evidence, trailing
from rlagent.models.findings import Finding
from rlagent.models.run import Severity
from rlagent.tools.untrusted import clip

DEGENERATE_SHARE = 0.20
"""findings.md: > 20 % of the sampled completions."""
FORMAT_DROP = 0.5
"""findings.md: > 50 % below its peak, sustained."""
FORMAT_LEARNT = 0.3
"""A format reward is 'learnt' once its level reached this (it cannot collapse before)."""
HACK_RISE = 0.2
HACK_FALL = 0.2
LENGTH_SHRINK = 0.6
_CORRECTNESS = re.compile(r"acc|correct|exact|answer|math|verif|solution|equal", re.I)
_FORMAT = re.compile(r"format|tag|xml|struct", re.I)
_COMPONENT = "reward_component/"


def _quotes(ctx: RuleContext, why: tuple[str, ...] = (), limit: int = 2) -> list[str]:
    """Sampled completions quoted as evidence (untrusted model output: clipped, never obeyed)."""
    chosen = [r for r in ctx.observation.rollouts if not why or r.why in why][:limit]
    return [
        f"sample (step {r.step}, {r.why}, reward {fmt(r.reward) if r.reward is not None else '?'}): {clip(r.completion, 120)!r}"
        for r in chosen
    ]


def degenerate_output(ctx: RuleContext) -> Finding | None:
    stats = ctx.observation.sample_stats
    total = stats.get("total", 0.0)
    if total < 4:
        return None
    share = stats.get("degenerate", 0.0) / total
    same = stats.get("identical", 0.0) / total
    step = ctx.observation.rollouts_step
    if share > DEGENERATE_SHARE:
        what = f"{pct(share)} of the {total:.0f} sampled completions of step {step} are empty or one character/token repeated"
    elif same > 0.5 and not _scores_high(stats):
        what = f"{pct(same)} of the {total:.0f} sampled completions of step {step} are one identical text"
    else:
        return None
    return finding(
        "degenerate_output",
        Severity.WARNING,
        f"degenerate output: {what} (threshold {pct(DEGENERATE_SHARE)})",
        [
            f"samples of step {step}: {stats.get('degenerate', 0):.0f} degenerate of {total:.0f}",
            *_quotes(ctx, ("degenerate", "worst", "best")),
        ],
        first_step=step,
        last_step=step,
    )


def _scores_high(stats: dict[str, float]) -> bool:
    """The repeated completion is paid by the reward function: one fixed pattern scoring is reward
    hacking's mark (findings.md, reading the samples), not a degenerate policy (whose empty or
    repeated-character answers earn nothing)."""
    top = stats.get("identical_reward")
    return top is not None and top > 0


def _components(ctx: RuleContext) -> dict[str, list[tuple[int, float]]]:
    names = {name for name in ctx.metric_names("orchestrator") if name.startswith(_COMPONENT)}
    return {name[len(_COMPONENT) :]: ctx.series("orchestrator", name) for name in sorted(names)}


def _level(points: list[tuple[int, float]], window: int = 5) -> list[tuple[int, float]]:
    values = [v for _, v in points]
    return [
        (points[i][0], sum(values[max(0, i - window + 1) : i + 1]) / len(values[max(0, i - window + 1) : i + 1]))
        for i in range(len(points))
    ]


def format_collapse(ctx: RuleContext) -> Finding | None:
    t = ctx.thresholds
    for name, points in _components(ctx).items():
        if not _FORMAT.search(name) or len(points) < t.sustain_steps + 3:
            continue
        levels = _level(points)
        peak_step, peak = max(levels, key=lambda p: p[1])
        if peak < FORMAT_LEARNT:
            continue
        after = [(s, v) for s, v in points if s > peak_step]
        streak = trailing(after, lambda v, peak=peak: v < FORMAT_DROP * peak)
        if len(streak) < t.sustain_steps:
            continue
        return finding(
            "format_collapse",
            Severity.WARNING,
            f"format reward `{name}` fell to {fmt(streak[-1][1])}, below half its peak {fmt(peak)} (step {peak_step}) "
            f"for {len(streak)} steps",
            [
                point(f"reward_component/{name} (5-step mean)", peak_step, peak),
                *points_evidence(f"reward_component/{name}", streak),
            ],
            first_step=streak[0][0],
            last_step=streak[-1][0],
        )
    return None


def _rose(points: list[tuple[int, float]], since: int) -> tuple[float, float] | None:
    before = [v for s, v in points if s <= since][-5:]
    after = [v for s, v in points][-5:]
    if not before or not after:
        return None
    return median(before), median(after)


def reward_hacking(ctx: RuleContext) -> Finding | None:
    """Suspected: a reward component rises while the correctness component falls (>= 10 steps), or the
    train reward rises while the eval score falls over 3 evals and completions shrink."""
    components = _components(ctx)
    correct = {n: p for n, p in components.items() if _CORRECTNESS.search(n)}
    proxies = {n: p for n, p in components.items() if n not in correct}
    for cname, cpoints in correct.items():
        if len(cpoints) < 15:
            continue
        clevels = _level(cpoints)
        peak_step, peak = max(clevels, key=lambda p: p[1])
        last = clevels[-1][1]
        if cpoints[-1][0] - peak_step < 10 or peak <= 0 or last > (1 - HACK_FALL) * peak:
            continue
        for pname, ppoints in proxies.items():
            moved = _rose(ppoints, peak_step)
            if moved is None or moved[1] - moved[0] < HACK_RISE:
                continue
            return finding(
                "reward_hacking",
                Severity.WARNING,
                f"suspected reward hacking: `{pname}` rose {fmt(moved[0])} -> {fmt(moved[1])} while `{cname}` fell from "
                f"{fmt(peak)} (step {peak_step}) to {fmt(last)}",
                [
                    point(f"reward_component/{cname} (5-step mean)", peak_step, peak),
                    point(f"reward_component/{cname} (5-step mean)", clevels[-1][0], last),
                    *_quotes(ctx, ("best",)),
                ],
                first_step=peak_step,
                last_step=cpoints[-1][0],
            )
    return _hacking_by_evals(ctx)


def _hacking_by_evals(ctx: RuleContext) -> Finding | None:
    by_env: dict[str, list[tuple[int, float]]] = {}
    for e in ctx.history.evals:
        by_env.setdefault(e.env, []).append((e.step, e.score))
    rewards = ctx.series("orchestrator", "reward")
    lengths = ctx.series("orchestrator", "output_tokens")
    if not rewards or len(lengths) < 10:
        return None
    early_len = median([v for _, v in lengths[:10]])
    late_len = median([v for _, v in lengths[-5:]])
    if early_len <= 0 or late_len > LENGTH_SHRINK * early_len:
        return None
    for env, points in by_env.items():
        points = sorted(points)[-3:]
        if len(points) < 3 or not all(b[1] < a[1] for a, b in itertools.pairwise(points)):
            continue
        if points[-1][1] > (1 - HACK_FALL) * points[0][1]:
            continue
        start = [v for s, v in rewards if s <= max(points[0][0], rewards[0][0] + 4)][-5:]
        end = [v for _, v in rewards][-5:]
        if not start or median(end) - median(start) < HACK_RISE * max(abs(median(start)), 0.1):
            continue
        return finding(
            "reward_hacking",
            Severity.WARNING,
            f"suspected reward hacking: train reward rose {fmt(median(start))} -> {fmt(median(end))} while eval `{env}` fell "
            f"{fmt(points[0][1])} -> {fmt(points[-1][1])} over 3 evals and completions shrank "
            f"{fmt(early_len)} -> {fmt(late_len)} tokens",
            [*(point(f"eval {env}", s, v) for s, v in points), *_quotes(ctx, ("best",))],
            first_step=points[0][0],
            last_step=rewards[-1][0],
        )
    return None


RULES = (degenerate_output, format_collapse, reward_hacking)
