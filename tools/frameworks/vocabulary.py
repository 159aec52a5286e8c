"""One vocabulary of metric names for every framework, so each rule works on verl, TRL, OpenRLHF and prime-rl.

Raw names are exactly those frameworks.md lists (sections 1.3, 2.2, 2.3, 3.3, 6) and prime-rl-formats.md
section 2. Where several raw names give one normalised name, the first one present wins: the tables list
the most faithful or newest name first.

Normalised names:
  reward_mean reward_std reward_max reward_min reward_group_std reward_shaped_mean return_mean
  advantage_mean zero_std_frac trainable_frac error_frac reward_component/<f> reward_component_std/<f>
  entropy kl_ref kl_coef ppo_kl mismatch_kl clip_frac clip_frac_low clip_frac_high
  response_length_mean response_length_max response_length_min terminated_length_mean total_length_mean
  prompt_length_mean truncation_ratio prompt_truncation_ratio aborted_ratio num_turns_mean filter_pass_rate
  grad_norm lr loss value_loss value_mean value_clip_frac explained_var critic_grad_norm critic_lr
  step_time timing/<phase> throughput mfu peak_mem_gb off_policy_max num_tokens global_step epoch val/<name>
Units differ between frameworks (verl throughput is tokens/s per GPU, prime-rl's for the whole trainer);
rules compare a run with its own history, so that is fine.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from rlagent.tools.bounds import NUMBER

FRAMEWORKS = ("verl", "trl", "openrlhf", "prime-rl")

_VERL = (
    # reward: raw sequence score first; critic/rewards/* is after the KL-in-reward penalty
    ("critic/score/mean", "reward_mean"),
    ("critic/score/max", "reward_max"),
    ("critic/score/min", "reward_min"),
    ("critic/rewards/mean", "reward_shaped_mean"),
    ("critic/advantages/mean", "advantage_mean"),
    ("critic/returns/mean", "return_mean"),
    ("critic/values/mean", "value_mean"),
    ("critic/vf_explained_var", "explained_var"),
    ("critic/vf_loss", "value_loss"),
    ("critic/vf_clipfrac", "value_clip_frac"),
    ("critic/grad_norm", "critic_grad_norm"),
    ("critic/lr", "critic_lr"),
    ("actor/pg_loss", "loss"),
    ("actor/loss", "loss"),  # new-engine worker (use_legacy_worker_impl=disable)
    ("actor/pg_clipfrac", "clip_frac"),
    ("actor/pg_clipfrac_lower", "clip_frac_low"),
    ("actor/ppo_kl", "ppo_kl"),
    ("actor/entropy", "entropy"),
    ("actor/entropy_loss", "entropy"),  # name in old docs
    ("actor/kl_loss", "kl_ref"),  # use_kl_loss (GRPO style)
    ("actor/reward_kl_penalty", "kl_ref"),  # use_kl_in_reward (PPO style)
    ("actor/kl_coef", "kl_coef"),
    ("actor/reward_kl_penalty_coeff", "kl_coef"),
    ("actor/grad_norm", "grad_norm"),
    ("actor/lr", "lr"),
    ("response_length/mean", "response_length_mean"),
    ("response_length/max", "response_length_max"),
    ("response_length/min", "response_length_min"),
    ("response_length/clip_ratio", "truncation_ratio"),
    ("prompt_length/mean", "prompt_length_mean"),
    ("prompt_length/clip_ratio", "prompt_truncation_ratio"),
    ("response/aborted_ratio", "aborted_ratio"),
    ("num_turns/mean", "num_turns_mean"),
    ("timing_s/step", "step_time"),
    ("timing/step", "step_time"),  # before verl v0.2 (Jan 2025)
    ("perf/time_per_step", "step_time"),
    ("perf/throughput", "throughput"),
    ("perf/mfu/actor", "mfu"),
    ("perf/max_memory_allocated_gb", "peak_mem_gb"),
    ("training/global_step", "global_step"),
    ("training/epoch", "epoch"),
)

_TRL = (
    ("reward", "reward_mean"),
    ("objective/scores", "reward_mean"),  # PPOTrainer
    ("reward_std", "reward_std"),
    ("objective/rlhf_reward", "reward_shaped_mean"),
    ("frac_reward_zero_std", "zero_std_frac"),
    ("entropy", "entropy"),
    ("objective/entropy", "entropy"),
    ("policy/entropy_avg", "entropy"),
    ("kl", "kl_ref"),
    ("objective/kl", "kl_ref"),
    ("policy/approxkl_avg", "ppo_kl"),
    ("clip_ratio/region_mean", "clip_frac"),
    ("clip_ratio", "clip_frac"),  # v0.16, and the Liger loss path
    ("cispo_clip_ratio", "clip_frac"),
    ("policy/clipfrac_avg", "clip_frac"),
    ("clip_ratio/low_mean", "clip_frac_low"),
    ("clip_ratio/high_mean", "clip_frac_high"),
    ("completions/mean_length", "response_length_mean"),
    ("mean_completion_length", "response_length_mean"),  # brief v0.17 dev name
    ("completion_length", "response_length_mean"),  # v0.14-v0.16
    ("completions/max_length", "response_length_max"),
    ("completions/min_length", "response_length_min"),
    ("completions/mean_terminated_length", "terminated_length_mean"),
    ("completions/clipped_ratio", "truncation_ratio"),
    ("loss", "loss"),
    ("loss/policy_avg", "loss"),
    ("loss/value_avg", "value_loss"),
    ("val/clipfrac_avg", "value_clip_frac"),
    ("grad_norm", "grad_norm"),
    ("learning_rate", "lr"),
    ("lr", "lr"),
    ("step_time", "step_time"),
    ("num_tokens", "num_tokens"),
    ("global_step", "global_step"),  # wandb `train/global_step`
    ("epoch", "epoch"),
)

_OPENRLHF = (
    ("rollout/reward_mean", "reward_mean"),  # whole batch, since v0.9.8
    ("reward", "reward_mean"),  # mean of micro-batch means
    ("rollout/reward_std", "reward_std"),
    ("group_reward_std", "reward_group_std"),
    ("return", "return_mean"),
    ("policy_loss", "loss"),
    ("act_loss", "loss"),  # actor tqdm bar
    ("entropy_loss", "entropy"),  # mean token entropy, logged only with --actor.entropy_coef
    ("ent_loss", "entropy"),
    ("kl", "kl_ref"),
    ("ppo_kl", "ppo_kl"),
    ("vllm_kl", "mismatch_kl"),
    ("ppo_clip_ratio", "clip_frac"),
    ("actor_grad_norm", "grad_norm"),
    ("grad_norm", "grad_norm"),  # actor tqdm bar
    ("actor_lr", "lr"),
    ("act_lr", "lr"),
    ("critic_loss", "value_loss"),
    ("values", "value_mean"),
    ("critic_grad_norm", "critic_grad_norm"),
    ("critic_lr", "critic_lr"),
    ("rollout/response_length_mean", "response_length_mean"),
    ("response_length", "response_length_mean"),
    ("gen_len", "response_length_mean"),
    ("total_length", "total_length_mean"),
    ("tot_len", "total_length_mean"),
    ("rollout/truncated_rate", "truncation_ratio"),
    ("truncated", "truncation_ratio"),
    ("timing/step_total", "step_time"),
    ("dynamic_filtering_pass_rate", "filter_pass_rate"),
    ("global_step", "global_step"),
)

_PRIME_RL = (
    ("loss/mean", "loss"),
    ("entropy/all/mean", "entropy"),
    ("mismatch_kl/all/mean", "mismatch_kl"),
    ("ref_kl/mean", "kl_ref"),
    ("optim/grad_norm", "grad_norm"),
    ("optim/lr", "lr"),
    ("perf/throughput", "throughput"),
    ("perf/mfu", "mfu"),
    ("perf/peak_memory", "peak_mem_gb"),
    ("time/step", "step_time"),
    ("train/agg/all/has_error/mean", "error_frac"),
    ("train/agg/all/num_output_tokens/mean", "response_length_mean"),
    ("train/agg/all/num_output_tokens/max", "response_length_max"),
    ("train/agg/all/num_output_tokens/min", "response_length_min"),
    ("train/agg/all/num_turns/mean", "num_turns_mean"),
    ("off_policy/max", "off_policy_max"),
    # layout L (prime-rl-formats.md "Orchestrator metric keys, L")
    ("reward/all/mean", "reward_mean"),
    ("reward/all/max", "reward_max"),
    ("reward/all/min", "reward_min"),
    ("decode_len/all/mean", "response_length_mean"),
    ("decode_len/all/max", "response_length_max"),
    ("errored_rollouts/all", "error_frac"),
)

EXACT: dict[str, tuple[tuple[str, str], ...]] = {
    "verl": _VERL,
    "trl": _TRL,
    "openrlhf": _OPENRLHF,
    "prime-rl": _PRIME_RL,
}

# Families: a pattern with at most one group and the normalised name ("{}" takes the group).
FAMILIES: dict[str, tuple[tuple[re.Pattern[str], str], ...]] = {
    "verl": (
        (re.compile(r"^timing_s/(.+)$"), "timing/{}"),
        (re.compile(r"^timing/(.+)$"), "timing/{}"),
        (re.compile(r"^val-core/(.+)$"), "val/{}"),
        (re.compile(r"^val-aux/(.+)$"), "val/aux/{}"),
    ),
    "trl": (
        (re.compile(r"^rewards/(.+)/mean$"), "reward_component/{}"),
        (re.compile(r"^rewards/(.+)/std$"), "reward_component_std/{}"),
        (re.compile(r"^rewards/([^/]+)$"), "reward_component/{}"),  # v0.14-v0.16
        (re.compile(r"^profiling/Time taken: (.+)$"), "timing/{}"),  # wandb only
        (re.compile(r"^eval_(.+)$"), "val/{}"),
    ),
    "openrlhf": (
        (re.compile(r"^timing/(.+)$"), "timing/{}"),
        (re.compile(r"^eval_(.+)$"), "val/{}"),
    ),
    "prime-rl": (
        (re.compile(r"^train/agg/all/[^/]+/reward/mean$"), "reward_mean"),
        (re.compile(r"^train/agg/all/[^/]+/reward/std$"), "reward_std"),
        (re.compile(r"^train/agg/all/[^/]+/reward/max$"), "reward_max"),
        (re.compile(r"^train/agg/all/[^/]+/reward/min$"), "reward_min"),
        (re.compile(r"^train/agg/all/[^/]+/is_truncated/mean$"), "truncation_ratio"),
        (re.compile(r"^train/agg/all/[^/]+/is_trainable/mean$"), "trainable_frac"),
        (re.compile(r"^train/agg/all/[^/]+/rewards/(.+)/mean$"), "reward_component/{}"),
        (re.compile(r"^is_truncated/all/mean$"), "truncation_ratio"),  # layout L
        (re.compile(r"^time/(.+)$"), "timing/{}"),
        (re.compile(r"^eval/([^/]+)/(?:all/[^/]+/)?(avg@\d+)$"), "val/{}"),
    ),
}
# prime-rl's eval pattern has two groups (env, avg@k): joined with "/".


def _tracker_key(framework: str, key: str) -> str:
    """TB/wandb tags of TRL and OpenRLHF carry `train/` or `eval/` in front of the console name."""
    if framework in ("trl", "openrlhf"):
        if key.startswith("train/"):
            return key[len("train/") :]
        if key.startswith("eval/"):
            rest = key[len("eval/") :]
            return rest if rest.startswith("eval_") else "eval_" + rest
    return key


def _check(framework: str) -> None:
    if framework not in EXACT:
        raise ValueError(f"unknown framework {framework!r}; one of {', '.join(FRAMEWORKS)}")


def mapping(framework: str, raw_keys) -> dict[str, str]:
    """normalised name -> the raw key it is read from, for the raw keys given."""
    _check(framework)
    keys = list(raw_keys)
    lookup = {_tracker_key(framework, key): key for key in reversed(keys)}
    out: dict[str, str] = {}
    for raw, name in EXACT[framework]:
        if raw in lookup and name not in out:
            out[name] = lookup[raw]
    exact_raw = {raw for raw, _ in EXACT[framework]}
    for key in keys:
        canonical = _tracker_key(framework, key)
        if canonical in exact_raw:
            continue
        for pattern, template in FAMILIES[framework]:
            match = pattern.match(canonical)
            if match:
                name = template.format("/".join(match.groups())) if match.groups() else template
                out.setdefault(name, key)
                break
    return out


def normalise(framework: str, raw: Mapping[str, float]) -> dict[str, float]:
    """`raw` (one step's metrics under the framework's names) under the normalised names.
    Keys the vocabulary does not know are left out; non-numeric values are ignored."""
    out: dict[str, float] = {}
    for name, key in mapping(framework, raw.keys()).items():
        value = raw[key]
        if isinstance(value, NUMBER):
            out[name] = float(value)
        elif value is None:
            out[name] = math.nan
    return out


def raw_names(framework: str, name: str) -> list[str]:
    """Exact raw names that give normalised `name` (families not included), best first."""
    _check(framework)
    return [raw for raw, normalised in EXACT[framework] if normalised == name]
