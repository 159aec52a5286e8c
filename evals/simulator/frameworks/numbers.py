"""The numbers of a SIMULATED framework run: one `StepNumbers` per step, shared by the three writers.

The healthy curves and most failure shapes are the prime-rl simulator's (`evals/simulator/dynamics.py`):
each framework scenario is mapped onto a prime-rl scenario with the same seed, batch, lengths and
failure (`EXPECTATIONS[kind].base`), and its `StepStats` give reward, entropy, grad norm, lengths,
truncation, trainable share and timings. What prime-rl runs cannot show is added here:
- per-component rewards (TRL `rewards/<func>/mean`): an accuracy (the prime-rl reward) and a format or
  tag component that is learnt in a few steps;
- degenerate-output: from the onset a growing share of completions are `!!!!...` up to the length cap;
- format-collapse: the format component falls to ~10 % of its peak (tau 4/severity steps);
- reward-hacking: a proxy component (tags) climbs to 1 while correctness and eval accuracy fall and
  completions shrink to a fifth;
- a reference KL for runs that log one, and the PPO clip fraction / policy KL.
Every draw comes from a named stream (`rng.stream`), so step N's numbers do not depend on other steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from ..dynamics import Dynamics, StepStats
from ..rng import lognormal, stream
from ..scenario import Scenario
from .scenario import FrameworkScenario


@dataclass(frozen=True, slots=True)
class StepNumbers:
    n: int
    score: float
    """Mean sequence reward (the sum of the components)."""
    score_std: float
    score_min: float
    score_max: float
    accuracy: float
    """Mean of the correctness component (0/1 per completion)."""
    components: tuple[tuple[str, float, float], ...]
    """(reward function, mean, std) in the order the run lists its reward functions."""
    val_accuracy: float
    """Accuracy of the policy at this step on the validation set (eval runs at some steps only)."""
    zero_std_frac: float
    """Share of prompts whose completions all got the same reward."""
    advantage_min: float
    advantage_max: float
    entropy: float
    kl: float
    """Reference KL (logged only when the run has a KL term)."""
    kl_coef: float
    ppo_kl: float
    clip_frac: float
    grad_norm: float
    loss: float
    lr: float
    len_mean: float
    len_min: float
    len_max: float
    clip_ratio: float
    """Share of completions cut at max_response_length."""
    prompt_mean: float
    prompt_min: float
    prompt_max: float
    gen_s: float
    reward_s: float
    old_log_prob_s: float
    ref_s: float
    adv_s: float
    update_s: float
    weights_s: float
    tokens: int
    mem_alloc_gb: float
    mem_reserved_gb: float
    cpu_mem_gb: float
    mfu: float
    nonfinite: bool
    degenerate_frac: float
    hacked_frac: float

    @property
    def step_s(self) -> float:
        """verl `timing_s/step`: generation through the weight update (validation and saving are outside)."""
        return self.gen_s + self.reward_s + self.old_log_prob_s + self.ref_s + self.adv_s + self.update_s + self.weights_s

    @property
    def throughput(self) -> float:
        return self.tokens / self.step_s


def _clip(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return min(hi, max(lo, x))


def _ramp(d: int, tau: float) -> float:
    return 1.0 - math.exp(-(d + 1) / max(tau, 1e-3))


def proxy(sc: FrameworkScenario) -> Scenario:
    """The prime-rl scenario whose curves this run reuses (same seed, batch, lengths, failure)."""
    exp = sc.expectation
    base = exp.base if (sc.attempt == 1 or not exp.ends_run) else "healthy"
    prompt = min(sc.max_prompt_length, 160)
    return Scenario(
        name=f"proxy-{sc.name}",
        layout="H",
        seed=sc.seed,
        steps=sc.max_steps,
        max_steps=sc.max_steps,
        kind=base,  # type: ignore[arg-type]
        profile=sc.profile,
        onset_step=sc.onset_step,
        severity=sc.severity,
        step_time_s=sc.step_time_s * 0.55,
        batch_size=sc.batch,
        group_size=sc.group_size,
        max_completion_tokens=sc.max_response_length,
        seq_len=sc.max_prompt_length + sc.max_response_length + 64,
        prompt_tokens=prompt,
        trace_fail_rate=0.0,
    )


class FrameworkNumbers:
    """Per-step numbers of one framework scenario, computed lazily and cached."""

    def __init__(self, sc: FrameworkScenario) -> None:
        self.sc = sc
        self.base = Dynamics(proxy(sc))
        self._cache: dict[int, StepNumbers] = {}
        r = stream(sc.seed, "fw-base")
        self.format0 = 0.15 + 0.1 * r.random()
        self.format_inf = 0.9 + 0.06 * r.random()
        self.format_tau = 5.0 + 3.0 * r.random()
        self.tag0 = 0.3 + 0.1 * r.random()

    @cached_property
    def components(self) -> tuple[str, ...]:
        """TRL reward functions (open-r1 style); verl and OpenRLHF log one reward."""
        if self.sc.kind == "reward-hacking":
            return ("accuracy_reward", "tag_count_reward")
        return ("accuracy_reward", "format_reward")

    def at(self, n: int) -> StepNumbers:
        if n not in self._cache:
            self._cache[n] = self._compute(n)
        return self._cache[n]

    def since(self, kind: str, n: int) -> int | None:
        sc = self.sc
        if sc.kind != kind or n < sc.onset_step:
            return None
        return n - sc.onset_step

    def _compute(self, n: int) -> StepNumbers:
        sc = self.sc
        st: StepStats = self.base.at(n)
        r = stream(sc.seed, "fw-step", n)
        accuracy = _clip(st.reward)
        len_mean, len_min, len_max, clip_ratio = st.output_tokens, st.output_tokens_min, st.output_tokens_max, st.truncation
        entropy = st.entropy
        degenerate = hacked = 0.0
        val = _clip(self.base.eval_at(n, self.base.sc.envs[0]).avg_at_k + 0.03)
        cap = float(sc.max_response_length)

        if (d := self.since("degenerate-output", n)) is not None:
            degenerate = _clip((0.3 + 0.12 * d) * sc.severity, 0.0, 0.92)
            len_mean = (1 - degenerate) * len_mean + degenerate * cap
            len_max = cap
            clip_ratio = max(clip_ratio, degenerate * (0.97 + 0.03 * r.random()))
            accuracy *= 1 - degenerate
            entropy *= 1 - 0.85 * degenerate
            val *= 1 - 0.8 * degenerate
        if (d := self.since("reward-hacking", n)) is not None:
            w = _ramp(d, 3.0 / sc.severity)
            hacked = _clip(0.95 * w)
            accuracy *= 1 - 0.7 * w
            val *= 1 - 0.75 * w
            shrink = 1 - 0.8 * w
            len_mean *= shrink
            len_min = max(8.0, len_min * shrink)
            len_max = max(len_mean * 1.6, len_max * shrink)
            clip_ratio *= shrink
            entropy *= 1 - 0.4 * w

        components: list[tuple[str, float, float]] = [("accuracy_reward", accuracy, math.sqrt(max(accuracy * (1 - accuracy), 0)))]
        if self.components[1] == "format_reward":
            fmt = self.format_inf - (self.format_inf - self.format0) * math.exp(-n / self.format_tau)
            if (d := self.since("format-collapse", n)) is not None:
                fmt *= max(0.08, math.exp(-(d + 1) / (4.0 / sc.severity)))
                accuracy *= 0.92
                components[0] = ("accuracy_reward", accuracy, math.sqrt(max(accuracy * (1 - accuracy), 0)))
            if st.reward_max - st.reward_min <= 1e-9 and sc.kind == "reward-constant":
                fmt = 0.0
            fmt *= 1 - degenerate
            fmt = _clip(fmt + r.gauss(0, 0.015)) if fmt > 0 else 0.0
            components.append(("format_reward", fmt, math.sqrt(max(fmt * (1 - fmt), 0))))
        else:
            tag = self.tag0 + (0.8 - self.tag0) * (1 - math.exp(-n / 8.0))
            if hacked:
                tag = tag + (1.0 - tag) * hacked
            tag = _clip(tag + r.gauss(0, 0.01))
            components.append(("tag_count_reward", tag, 0.25 * math.sqrt(max(tag * (1 - tag), 0))))

        constant = sc.kind == "reward-constant" and st.reward_max - st.reward_min <= 1e-9
        if sc.framework == "trl":
            score = sum(mean for _, mean, _ in components)
            score_std = math.sqrt(sum(std**2 for _, _, std in components))
        else:
            # verl / OpenRLHF: one rule-based score; a hacked completion fools the (lenient) train reward,
            # while the strict `acc` it also returns (and validation, which reads `acc`) falls
            score = min(1.0, accuracy + hacked * (1 - accuracy) * 0.95)
            score_std = math.sqrt(max(score * (1 - score), 0))
        if constant:
            score = score_std = 0.0
        score_min = 0.0
        score_max = 0.0 if constant else (float(len(components)) if sc.framework == "trl" else 1.0)
        zero_std = 1.0 - st.trainable / max(st.effective, 1)
        groups = max(1, sc.prompts_per_step)
        zero_std = round(_clip(zero_std) * groups) / groups
        if constant:
            zero_std = 1.0

        kl = st.ref_kl if st.ref_kl is not None else 0.0015 * n**0.8 * lognormal(r, 0.15)
        compute = st.train_compute_s
        tokens = round(sc.batch * (st.input_tokens + len_mean))
        nonfinite = st.nonfinite
        loss = st.loss
        grad = st.grad_norm
        if nonfinite:
            kl = math.nan
        return StepNumbers(
            n=n,
            score=score,
            score_std=score_std,
            score_min=score_min,
            score_max=score_max,
            accuracy=accuracy,
            components=tuple(components),
            val_accuracy=_clip(val),
            zero_std_frac=zero_std,
            advantage_min=-1.2 - 0.6 * r.random() if not constant else 0.0,
            advantage_max=1.4 + 1.0 * r.random() if not constant else 0.0,
            entropy=entropy,
            kl=kl,
            kl_coef=0.001,
            ppo_kl=math.nan if nonfinite else 1.2e-4 * lognormal(r, 0.5),
            clip_frac=math.nan if nonfinite else 0.0015 * lognormal(r, 0.5),
            grad_norm=grad,
            loss=loss,
            lr=1e-6,
            len_mean=len_mean,
            len_min=max(1.0, min(len_min, len_mean)),
            len_max=max(len_max, len_mean),
            clip_ratio=round(_clip(clip_ratio) * sc.batch) / sc.batch,  # a share of the batch's completions
            prompt_mean=st.input_tokens,
            prompt_min=max(20.0, st.input_tokens * 0.55),
            prompt_max=min(float(sc.max_prompt_length), st.input_tokens * 1.7),
            gen_s=st.gen_s,
            reward_s=0.6 + 1.2 * r.random(),
            old_log_prob_s=0.22 * compute,
            ref_s=0.2 * compute if sc.use_kl else 0.0,
            adv_s=0.04 + 0.05 * r.random(),
            update_s=0.5 * compute,
            weights_s=2.0 + 1.5 * r.random(),
            tokens=tokens,
            mem_alloc_gb=st.peak_mem_gib,
            mem_reserved_gb=st.peak_mem_gib * (1.18 + 0.05 * r.random()),
            cpu_mem_gb=38.0 + 4.0 * r.random(),
            mfu=0.0 if nonfinite else st.mfu / 100,
            nonfinite=nonfinite,
            degenerate_frac=degenerate,
            hacked_frac=hacked,
        )
