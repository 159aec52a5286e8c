"""The numbers of a run: what every step's metrics are, healthy or failing.

One `StepStats` per step, drawn from named random streams (see `rng.py`) around smooth
trends: reward rises and saturates, entropy declines slowly, grad norm wanders with one normal
~3x single-step excursion. The injected failure bends these trends from `onset_step`, scaled by
`severity`; nothing is pinned to a fixed step, so the signals move with the scenario.

Per kind (severity 1.0 is the textbook case):
- entropy-collapse: entropy decays to `0.03/severity` of its level (tau `3/severity` steps);
  groups become identical, so the trainable fraction and grad norm fall, reward stalls.
- nan: from the onset each step is non-finite with probability `severity` (the onset always);
  after the first NaN step the policy is broken: reward ~0, outputs run to the length cap.
- crash-oom: peak memory climbs over the steps before the onset, where the trainer dies.
- truncation: the truncated fraction climbs to `0.5 + 0.3*severity` (tau `8/severity` steps),
  completions approach `max_completion_tokens`, reward erodes.
The other kinds' shapes are in `shapes.py` and in `_failure` below; profiles change the healthy
curves (fast/slow learner, early plateau, noisy, and `alarming`: the normal-but-alarming run).
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, replace
from typing import NamedTuple

from . import shapes
from .rng import binomial, lognormal, stream
from .scenario import Scenario


@dataclass(frozen=True, slots=True)
class EnvStep:
    """One train env's share of an orchestrator step (multi-env runs)."""

    name: str
    ratio: float
    reward: float
    turns: float
    branches: float
    off_policy_max: int
    error: float
    cancelled: float
    truncation: float
    output_tokens: float


@dataclass(frozen=True, slots=True)
class StepStats:
    """Everything one step reports, trainer side and orchestrator side."""

    step: int
    # trainer
    loss: float
    entropy: float
    mismatch_kl: float
    grad_norm: float
    lr: float
    throughput: float
    mfu: float
    peak_mem_gib: float
    nonfinite: bool
    train_compute_s: float
    # orchestrator (quality over the shipped batch, error/cancel over the arrival window)
    gen_s: float
    reward: float
    reward_std: float
    reward_min: float
    reward_max: float
    reward_p10: float
    reward_p90: float
    trainable: int
    effective: int
    turns: float
    branches: float
    off_policy_max: int
    error: float
    cancelled: float
    truncation: float
    output_tokens: float
    output_tokens_min: float
    output_tokens_max: float
    input_tokens: float
    generated: int
    failed: int
    cancelled_n: int
    envs: tuple[EnvStep, ...]
    ref_kl: float | None = None
    """Reference KL (only runs with a KL term log it)."""
    empty_batches: int = 0
    """Empty train batches the orchestrator cut before this step's batch."""
    stale_cancelled: int = 0
    """Episodes cancelled past max_off_policy_steps while collecting this step (warned)."""
    disk_free_ratio: float | None = None
    """Checkpoint disk free fraction, when a failure changes it."""


@dataclass(frozen=True, slots=True)
class EvalStats:
    env: str
    reward: float
    avg_at_k: float
    pass_at_k: float
    truncation: float
    error: float
    turns: float
    output_tokens: float


def _params_billion(model: str) -> float:
    match = re.search(r"(\d+(?:\.\d+)?)[Bb]\b", model)
    return float(match.group(1)) if match else 1.0


def _clip(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return min(hi, max(lo, x))


def _profiled(profile: str, r0: float, rinf: float, tau: float) -> tuple[float, float, float]:
    """A healthy reward curve reshaped: fast or slow learner, early plateau."""
    if profile == "fast":
        return r0, min(0.95, rinf + 0.1), tau * 0.3
    if profile == "slow":
        return r0, min(0.9, rinf + 0.05), tau * 3.0
    if profile == "plateau":
        return r0, rinf, tau * 0.35
    return r0, rinf, tau


class _Lengths(NamedTuple):
    trunc_extra: float
    """Truncated fraction added by the truncation failure."""
    truncation: float
    out_mean: float
    out_max: float
    out_min: float
    input_tokens: float


class _Arrivals(NamedTuple):
    failed: int
    cancelled_n: int
    stale: int
    """Of the cancelled, those past max_off_policy_steps."""
    generated: int
    off_policy: int


class _Trainer(NamedTuple):
    compute: float
    gen: float
    throughput: float
    mfu: float
    peak_mem: float
    grad: float
    entropy: float
    loss: float
    kl: float
    nonfinite: bool
    empties: int


class Dynamics:
    """Per-step stats for one scenario, computed lazily and cached."""

    def __init__(self, scenario: Scenario) -> None:
        self.sc = scenario
        self._cache: dict[int, StepStats] = {}
        self._cum: list[tuple[float, int, int]] = [(0.0, 0, 0)]
        base = stream(scenario.seed, "base")
        self.entropy0 = 0.42 + 0.08 * base.random()
        self.grad0 = 0.18 + 0.06 * base.random()
        self.env_curves = {
            env: (0.18 + 0.1 * base.random(), 0.72 + 0.15 * base.random(), 25 + 15 * base.random()) for env in scenario.envs
        }
        if scenario.profile != "default":
            self.env_curves = {env: _profiled(scenario.profile, *curve) for env, curve in self.env_curves.items()}
        noisy = scenario.profile == "noisy"
        self.noise = {"reward": 0.06 if noisy else 0.02, "entropy": 0.09 if noisy else 0.03, "grad": 0.3 if noisy else 0.12}
        self.alarming = scenario.profile == "alarming"
        self.spike_step = stream(scenario.seed, "spike").randint(8, max(9, min(scenario.max_steps, 60) - 4))
        self.params_b = _params_billion(scenario.model)

    # ---- failure shapes -------------------------------------------------------------

    def collapse_factor(self, n: int) -> float:
        sc = self.sc
        if sc.kind != "entropy-collapse" or n < sc.onset_step:
            return 1.0
        sev = max(sc.severity, 1e-3)
        floor = _clip(0.03 / sev, 0.005, 0.9)
        return floor + (1 - floor) * math.exp(-(n - sc.onset_step) / (3.0 / sev))

    def is_nan(self, n: int) -> bool:
        sc = self.sc
        if sc.kind != "nan" or n < sc.onset_step:
            return False
        return n == sc.onset_step or stream(sc.seed, "nan", n).random() < sc.severity

    def truncation_level(self, n: int) -> float:
        """Extra truncated fraction from the truncation failure (0 before the onset)."""
        sc = self.sc
        if sc.kind != "truncation" or n < sc.onset_step:
            return 0.0
        sev = max(sc.severity, 1e-3)
        target = min(0.97, 0.5 + 0.3 * sev)
        return target * (1 - math.exp(-(n - sc.onset_step + 1) / (8.0 / sev)))

    def policy_broken(self, n: int) -> bool:
        """After a NaN step the broadcast weights are NaN: rollouts are garbage."""
        return self.sc.kind == "nan" and n > self.sc.onset_step

    # ---- per step --------------------------------------------------------------------

    def reward_curve(self, env: str, n: int) -> float:
        r0, rinf, tau = self.env_curves[env]
        sc = self.sc
        if sc.kind == "reward-flat" and n > sc.onset_step:
            n = sc.onset_step  # learning stopped: the level of the onset, noise around it
        return r0 + (rinf - r0) * (1 - math.exp(-n / tau))

    def reward_factor(self, n: int) -> float:
        """Multiplier on the reward from failures that erode it."""
        sc = self.sc
        if (d := shapes.since(sc, "reward-regression", n)) is not None:
            return 1 - min(0.8, 0.5 * sc.severity) * shapes.ramp(d, 7 / sc.severity)
        if (d := shapes.since(sc, "entropy-explosion", n)) is not None:
            return 1 - min(0.7, 0.02 * sc.severity * (d + 1))
        if (d := shapes.since(sc, "length-collapse", n)) is not None:
            return 0.75
        if shapes.grad_spike(sc, n):
            return 0.93
        return 1.0

    def at(self, n: int) -> StepStats:
        if n not in self._cache:
            self._cache[n] = self._compute(n)
        return self._cache[n]

    def _compute(self, n: int) -> StepStats:
        """One step's stats. Every draw comes from the step's stream `r` in a fixed order (the
        helpers below are called in that order): the same scenario gives the same bytes."""
        sc = self.sc
        r = stream(sc.seed, "step", n)
        collapse = self.collapse_factor(n)
        broken = self.policy_broken(n)
        ln = self._lengths(n, r, broken)
        env_steps = self._env_rewards(n, r, ln, collapse, broken)
        reward = sum(e.reward * e.ratio for e in env_steps)
        arr = self._arrivals(n, r)
        env_steps = [
            replace(
                e,
                off_policy_max=arr.off_policy,
                error=arr.failed / arr.generated * lognormal(r, 0.2),
                cancelled=arr.cancelled_n / arr.generated,
            )
            for e in env_steps
        ]
        std, trainable, constant = self._advantages(n, r, reward, collapse, broken)
        tr = self._trainer(n, r, ln, collapse, constant)
        return StepStats(
            step=n,
            loss=tr.loss,
            entropy=tr.entropy,
            mismatch_kl=tr.kl,
            grad_norm=tr.grad,
            lr=3e-6,
            throughput=tr.throughput,
            mfu=tr.mfu,
            peak_mem_gib=tr.peak_mem,
            nonfinite=tr.nonfinite,
            train_compute_s=tr.compute,
            gen_s=tr.gen,
            reward=reward,
            reward_std=std,
            reward_min=_clip(reward - 2.4 * std - 0.05 * r.random()) if not constant else reward,
            reward_max=_clip(reward + 2.4 * std + 0.05 * r.random()) if not constant else reward,
            reward_p10=_clip(reward - 1.28 * std),
            reward_p90=_clip(reward + 1.28 * std),
            trainable=trainable,
            effective=sc.batch_size,
            turns=sum(e.turns * e.ratio for e in env_steps),
            branches=1.0,
            off_policy_max=arr.off_policy,
            error=arr.failed / arr.generated,
            cancelled=arr.cancelled_n / arr.generated,
            truncation=ln.truncation,
            output_tokens=ln.out_mean,
            output_tokens_min=ln.out_min,
            output_tokens_max=ln.out_max,
            input_tokens=ln.input_tokens,
            generated=arr.generated,
            failed=arr.failed,
            cancelled_n=arr.cancelled_n,
            envs=tuple(env_steps),
            ref_kl=shapes.ref_kl(sc, n),
            empty_batches=tr.empties,
            stale_cancelled=arr.stale,
        )

    def _lengths(self, n: int, r: random.Random, broken: bool) -> _Lengths:
        """Completion lengths and the truncated fraction."""
        sc = self.sc
        trunc_extra = self.truncation_level(n)
        normal_len = sc.max_completion_tokens * 0.3 * (1 + 0.15 * math.tanh(n / 50)) * lognormal(r, 0.04)
        truncation = _clip(0.018 * lognormal(r, 0.5), 0, 0.06)
        if trunc_extra:
            truncation = _clip(truncation + trunc_extra + r.gauss(0, 0.02), 0, 0.99)
            normal_len *= 1 + 1.2 * trunc_extra
        if broken:
            truncation = _clip(0.95 + r.gauss(0, 0.02), 0, 1)
        normal_len = self._length_failure(n, normal_len)
        if self.alarming:
            truncation = _clip(truncation * 1.8, 0, 0.07)
        if (d := shapes.since(sc, "length-explosion", n)) is not None:
            truncation = _clip(truncation + 0.75 * shapes.ramp(d, 6 / sc.severity) + r.gauss(0, 0.02), 0, 0.98)
        normal_len = min(normal_len, sc.max_completion_tokens * (0.97 if sc.kind == "length-explosion" else 0.9))
        return _Lengths(
            trunc_extra=trunc_extra,
            truncation=truncation,
            out_mean=(1 - truncation) * normal_len + truncation * sc.max_completion_tokens,
            out_max=float(sc.max_completion_tokens) if truncation > 0.004 else normal_len * 1.8,
            out_min=max(1.0, normal_len * 0.3 * lognormal(r, 0.1)) if not broken else sc.max_completion_tokens * 0.6,
            input_tokens=sc.prompt_tokens * lognormal(r, 0.02),
        )

    def _env_rewards(self, n: int, r: random.Random, ln: _Lengths, collapse: float, broken: bool) -> list[EnvStep]:
        """Each train env's reward and share of the step (the aggregate is their weighted mean)."""
        sc = self.sc
        env_steps: list[EnvStep] = []
        weights = [lognormal(r, 0.1) for _ in sc.envs]
        total_w = sum(weights)
        for env, w in zip(sc.envs, weights, strict=True):
            reward = self.reward_curve(env, n) + r.gauss(0, self.noise["reward"])
            if collapse < 1:
                reward = self.reward_curve(env, sc.onset_step) * (0.9 + 0.07 * collapse) + r.gauss(0, 0.02 * collapse)
            if ln.trunc_extra:
                reward *= 1 - 0.7 * ln.trunc_extra
            if broken:
                reward = abs(r.gauss(0.01, 0.01))
            reward = self._reward_failure(n, reward)
            env_steps.append(
                EnvStep(
                    name=env,
                    ratio=w / total_w,
                    reward=_clip(reward),
                    turns=sc.turns if sc.turns == 1 else sc.turns * lognormal(r, 0.05),
                    branches=1.0,
                    off_policy_max=0,
                    error=0.0,
                    cancelled=0.0,
                    truncation=_clip(ln.truncation * lognormal(r, 0.1)),
                    output_tokens=ln.out_mean * lognormal(r, 0.05),
                )
            )
        return env_steps

    def _arrivals(self, n: int, r: random.Random) -> _Arrivals:
        """The shipped batch plus failed and cancelled episodes, and how off-policy they were."""
        sc = self.sc
        fail_rate = (0.032 if self.alarming else sc.trace_fail_rate) * lognormal(r, 0.5)
        fail_rate += self.extra_fail_rate(n)
        failed = binomial(r, sc.batch_size, min(fail_rate, 0.9))
        cancelled_n = sc.group_size if r.random() < 0.05 else 0
        stale = self._stale_cancelled(n)
        cancelled_n += stale
        off_policy = 0 if n == 1 else (2 if r.random() < 0.2 else 1)
        if stale:
            off_policy = 8
        return _Arrivals(failed, cancelled_n, stale, sc.batch_size + failed + cancelled_n, off_policy)

    def _advantages(self, n: int, r: random.Random, reward: float, collapse: float, broken: bool) -> tuple[float, int, bool]:
        """(reward std within groups, trainable rollouts, every rollout scored alike)."""
        sc = self.sc
        std = 0.35 * math.sqrt(max(reward * (1 - reward), 1e-4)) * (collapse**0.5)
        if broken:
            std = 0.01
        trainable_frac = 0.93 * (0.15 + 0.85 * collapse) * lognormal(r, 0.02)
        if broken:
            trainable_frac = 0.1
        if (d := shapes.since(sc, "zero-advantage", n)) is not None:
            w = shapes.ramp(d, 3 / sc.severity)
            trainable_frac = max(0.02, trainable_frac * (1 - w) + 0.12 / sc.severity * w * lognormal(r, 0.1))
            std *= 1 - 0.8 * w
        constant = shapes.since(sc, "reward-constant", n) is not None
        if constant:
            trainable_frac, std = 0.0, 0.0
        return std, min(sc.batch_size, round(sc.batch_size * trainable_frac)), constant

    def _trainer(self, n: int, r: random.Random, ln: _Lengths, collapse: float, constant: bool) -> _Trainer:
        """The trainer's side: timings, throughput, memory, and the optimisation metrics."""
        sc = self.sc
        tokens = sc.batch_size * (ln.input_tokens + ln.out_mean)
        ref_tokens = sc.batch_size * (sc.prompt_tokens + sc.max_completion_tokens * 0.3)
        compute = sc.step_time_s * (tokens / ref_tokens) ** 0.8 * lognormal(r, 0.04)
        gen = sc.step_time_s * 0.95 * (ln.out_mean / (sc.max_completion_tokens * 0.3)) ** 0.9 * lognormal(r, 0.08)
        slow = shapes.compute_factor(sc, n)
        compute *= slow
        gen *= shapes.generation_factor(sc, n)
        # fwd/bwd throughput (packed micro-batches), not tokens per wall-clock step
        nominal_tps = 9000.0 / self.params_b**0.8 * sc.trainer_gpus
        throughput = nominal_tps * (tokens / ref_tokens) ** 0.15 * lognormal(r, 0.03) / slow
        mfu = throughput * 6 * self.params_b * 1e9 / (989e12 * sc.trainer_gpus) * 100
        peak_mem = (16 + 12 * self.params_b) * lognormal(r, 0.004)
        if sc.kind == "crash-oom" and 0 < sc.onset_step - n <= 3:
            peak_mem = min(79.0, peak_mem + (70 - peak_mem) * (4 - (sc.onset_step - n)) / 3 * sc.severity)
        grad = self.grad0 * (1 - 0.25 * n / (n + 100)) * lognormal(r, self.noise["grad"]) * (0.35 + 0.65 * collapse)
        if n == self.spike_step:
            grad *= (3.8 if self.alarming else 2.8) + 0.4 * r.random()
        entropy = self.entropy0 * (0.6 + 0.4 * math.exp(-n / 150)) * lognormal(r, self.noise["entropy"]) * collapse
        loss = r.gauss(0.0004, 0.003)
        kl = 0.0008 * lognormal(r, 0.25)
        k = stream(sc.seed, "failure", sc.kind, n)
        entropy *= shapes.entropy_factor(sc, n)
        kl *= shapes.mismatch_kl_factor(sc, n)
        if shapes.grad_spike(sc, n):
            grad *= 14 + 8 * sc.severity * k.random()
            loss *= 6
        if (self.alarming and n <= 3) or constant:
            loss = 0.0  # advantage-weighted loss of a batch with zero advantages
        if constant:
            grad = 0.0
        nonfinite = self.is_nan(n)
        if nonfinite:
            loss = entropy = kl = grad = math.nan
        empties = self._empty_batches(n, k)
        gen *= 1 + empties
        return _Trainer(compute, gen, throughput, mfu, peak_mem, grad, entropy, loss, kl, nonfinite, empties)

    # ---- failure details -------------------------------------------------------------------

    def _length_failure(self, n: int, normal_len: float) -> float:
        sc = self.sc
        if (d := shapes.since(sc, "length-collapse", n)) is not None:
            return normal_len * (0.22 / math.sqrt(sc.severity)) ** min(1.0, (d + 1) / 2)
        if (d := shapes.since(sc, "length-explosion", n)) is not None:
            return normal_len + (sc.max_completion_tokens * 0.95 - normal_len) * shapes.ramp(d, 6 / sc.severity)
        if (d := shapes.since(sc, "entropy-explosion", n)) is not None:
            return normal_len * (1 + 0.03 * sc.severity * (d + 1))
        return normal_len

    def _reward_failure(self, n: int, reward: float) -> float:
        sc = self.sc
        if shapes.since(sc, "reward-constant", n) is not None:
            return 0.0
        if (d := shapes.since(sc, "zero-advantage", n)) is not None:
            w = shapes.ramp(d, 3 / sc.severity)
            return reward * (1 - w) + (0.985 + 0.005 * stream(sc.seed, "za", n).gauss(0, 1)) * w
        return reward * self.reward_factor(n)

    def extra_fail_rate(self, n: int) -> float:
        """Failed-episode rate added by env and rollout failures."""
        sc = self.sc
        for kind in ("env-errors", "errored-rollouts"):
            if (d := shapes.since(sc, kind, n)) is not None:
                return (0.06 + 0.08 * sc.severity) * shapes.ramp(d, 4)
        return 0.0

    def _stale_cancelled(self, n: int) -> int:
        sc = self.sc
        d = shapes.since(sc, "off-policy-drops", n)
        if d is None:
            return 0
        r = stream(sc.seed, "stale", n)
        if r.random() > min(0.95, 0.45 + 0.06 * d * sc.severity):
            return 0
        return max(1, round(sc.group_size * (0.5 + 0.25 * d * sc.severity) * (0.7 + 0.6 * r.random())))

    def _empty_batches(self, n: int, k: random.Random) -> int:
        sc = self.sc
        d = shapes.since(sc, "empty-batches", n)
        if d is None:
            return 0
        if d > 0 and k.random() > min(0.9, 0.4 * sc.severity + 0.05 * d):
            return 0
        return 1 + int(k.random() * (1 + 2 * sc.severity))

    def eval_at(self, n: int, env: str) -> EvalStats:
        """Eval of the policy at step n on `env` (a bit below the train reward)."""
        sc = self.sc
        r = stream(sc.seed, "eval", n, env)
        train = self.at(n)
        base = self.reward_curve(env, n) if env in self.env_curves else train.reward
        if self.collapse_factor(n) < 1 or self.truncation_level(n) or self.policy_broken(n) or self.reward_factor(n) < 1:
            base = min(base, train.reward)
        if (d := shapes.since(sc, "eval-regression", n)) is not None:
            base = self.reward_curve(env, sc.onset_step) * (1 - min(0.9, 0.016 * sc.severity * (d + 1)))
        reward = _clip(base - 0.04 + r.gauss(0, 0.015))
        return EvalStats(
            env=env,
            reward=reward,
            avg_at_k=reward,
            pass_at_k=_clip(reward + 0.15 + r.gauss(0, 0.02)),
            truncation=train.truncation,
            error=0.0,
            turns=train.turns,
            output_tokens=train.output_tokens * lognormal(r, 0.05),
        )

    def cumulative(self, n: int) -> tuple[float, int, int]:
        """(tokens, rollouts, tasks) trained on through step n."""
        while len(self._cum) <= n:
            k = len(self._cum)
            st = self.at(k)
            tokens, rollouts, tasks = self._cum[-1]
            self._cum.append(
                (
                    tokens + st.effective * (st.input_tokens + st.output_tokens),
                    rollouts + st.effective,
                    tasks + st.effective // self.sc.group_size,
                )
            )
        return self._cum[n]
