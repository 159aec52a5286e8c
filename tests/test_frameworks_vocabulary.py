"""vocabulary.py: every raw name frameworks.md (and prime-rl-formats.md section 2) lists, name by name."""

from __future__ import annotations

import math

import pytest

from rlagent.tools.frameworks.vocabulary import EXACT, FRAMEWORKS, mapping, normalise, raw_names

# (framework, raw name as frameworks.md lists it, normalised name)
NAMES = [
    # verl, frameworks.md 1.3
    ("verl", "critic/score/mean", "reward_mean"),
    ("verl", "critic/score/max", "reward_max"),
    ("verl", "critic/score/min", "reward_min"),
    ("verl", "critic/rewards/mean", "reward_shaped_mean"),
    ("verl", "critic/advantages/mean", "advantage_mean"),
    ("verl", "critic/returns/mean", "return_mean"),
    ("verl", "critic/values/mean", "value_mean"),
    ("verl", "critic/vf_explained_var", "explained_var"),
    ("verl", "critic/vf_loss", "value_loss"),
    ("verl", "critic/vf_clipfrac", "value_clip_frac"),
    ("verl", "critic/grad_norm", "critic_grad_norm"),
    ("verl", "critic/lr", "critic_lr"),
    ("verl", "actor/pg_loss", "loss"),
    ("verl", "actor/loss", "loss"),
    ("verl", "actor/pg_clipfrac", "clip_frac"),
    ("verl", "actor/pg_clipfrac_lower", "clip_frac_low"),
    ("verl", "actor/ppo_kl", "ppo_kl"),
    ("verl", "actor/entropy", "entropy"),
    ("verl", "actor/entropy_loss", "entropy"),
    ("verl", "actor/kl_loss", "kl_ref"),
    ("verl", "actor/kl_coef", "kl_coef"),
    ("verl", "actor/reward_kl_penalty", "kl_ref"),
    ("verl", "actor/reward_kl_penalty_coeff", "kl_coef"),
    ("verl", "actor/grad_norm", "grad_norm"),
    ("verl", "actor/lr", "lr"),
    ("verl", "response_length/mean", "response_length_mean"),
    ("verl", "response_length/max", "response_length_max"),
    ("verl", "response_length/min", "response_length_min"),
    ("verl", "response_length/clip_ratio", "truncation_ratio"),
    ("verl", "prompt_length/mean", "prompt_length_mean"),
    ("verl", "prompt_length/clip_ratio", "prompt_truncation_ratio"),
    ("verl", "response/aborted_ratio", "aborted_ratio"),
    ("verl", "num_turns/mean", "num_turns_mean"),
    ("verl", "timing_s/step", "step_time"),
    ("verl", "timing/step", "step_time"),
    ("verl", "perf/time_per_step", "step_time"),
    ("verl", "timing_s/gen", "timing/gen"),
    ("verl", "timing_s/reward", "timing/reward"),
    ("verl", "timing_s/old_log_prob", "timing/old_log_prob"),
    ("verl", "timing_s/ref", "timing/ref"),
    ("verl", "timing_s/values", "timing/values"),
    ("verl", "timing_s/adv", "timing/adv"),
    ("verl", "timing_s/update_critic", "timing/update_critic"),
    ("verl", "timing_s/update_actor", "timing/update_actor"),
    ("verl", "timing_s/update_weights", "timing/update_weights"),
    ("verl", "timing_s/testing", "timing/testing"),
    ("verl", "timing_s/save_checkpoint", "timing/save_checkpoint"),
    ("verl", "timing_s/agent_loop/generate_sequences/mean", "timing/agent_loop/generate_sequences/mean"),
    ("verl", "timing/gen", "timing/gen"),
    ("verl", "perf/throughput", "throughput"),
    ("verl", "perf/mfu/actor", "mfu"),
    ("verl", "perf/max_memory_allocated_gb", "peak_mem_gb"),
    ("verl", "training/global_step", "global_step"),
    ("verl", "training/epoch", "epoch"),
    ("verl", "val-core/openai/gsm8k/acc/mean@4", "val/openai/gsm8k/acc/mean@4"),
    ("verl", "val-core/openai/gsm8k/reward/maj@4/mean", "val/openai/gsm8k/reward/maj@4/mean"),
    ("verl", "val-aux/openai/gsm8k/reward/best@4/mean", "val/aux/openai/gsm8k/reward/best@4/mean"),
    # TRL GRPO, frameworks.md 2.2
    ("trl", "reward", "reward_mean"),
    ("trl", "reward_std", "reward_std"),
    ("trl", "rewards/accuracy_reward/mean", "reward_component/accuracy_reward"),
    ("trl", "rewards/accuracy_reward/std", "reward_component_std/accuracy_reward"),
    ("trl", "rewards/format_reward", "reward_component/format_reward"),
    ("trl", "frac_reward_zero_std", "zero_std_frac"),
    ("trl", "entropy", "entropy"),
    ("trl", "kl", "kl_ref"),
    ("trl", "clip_ratio/region_mean", "clip_frac"),
    ("trl", "clip_ratio/low_mean", "clip_frac_low"),
    ("trl", "clip_ratio/high_mean", "clip_frac_high"),
    ("trl", "cispo_clip_ratio", "clip_frac"),
    ("trl", "clip_ratio", "clip_frac"),
    ("trl", "completions/mean_length", "response_length_mean"),
    ("trl", "completions/min_length", "response_length_min"),
    ("trl", "completions/max_length", "response_length_max"),
    ("trl", "completions/mean_terminated_length", "terminated_length_mean"),
    ("trl", "completion_length", "response_length_mean"),
    ("trl", "mean_completion_length", "response_length_mean"),
    ("trl", "completions/clipped_ratio", "truncation_ratio"),
    ("trl", "num_tokens", "num_tokens"),
    ("trl", "step_time", "step_time"),
    ("trl", "loss", "loss"),
    ("trl", "grad_norm", "grad_norm"),
    ("trl", "learning_rate", "lr"),
    ("trl", "epoch", "epoch"),
    ("trl", "eval_reward", "val/reward"),
    ("trl", "eval_loss", "val/loss"),
    ("trl", "profiling/Time taken: GRPOTrainer._generate", "timing/GRPOTrainer._generate"),
    # TRL PPOTrainer, frameworks.md 2.3
    ("trl", "objective/kl", "kl_ref"),
    ("trl", "objective/entropy", "entropy"),
    ("trl", "objective/scores", "reward_mean"),
    ("trl", "objective/rlhf_reward", "reward_shaped_mean"),
    ("trl", "policy/approxkl_avg", "ppo_kl"),
    ("trl", "policy/clipfrac_avg", "clip_frac"),
    ("trl", "policy/entropy_avg", "entropy"),
    ("trl", "loss/policy_avg", "loss"),
    ("trl", "loss/value_avg", "value_loss"),
    ("trl", "val/clipfrac_avg", "value_clip_frac"),
    ("trl", "lr", "lr"),
    ("trl", "global_step", "global_step"),  # wandb `train/global_step` (frameworks.md 2.1)
    # OpenRLHF, frameworks.md 3.3 and the tqdm bars of 3.1
    ("openrlhf", "reward", "reward_mean"),
    ("openrlhf", "rollout/reward_mean", "reward_mean"),
    ("openrlhf", "rollout/reward_std", "reward_std"),
    ("openrlhf", "group_reward_std", "reward_group_std"),
    ("openrlhf", "return", "return_mean"),
    ("openrlhf", "policy_loss", "loss"),
    ("openrlhf", "act_loss", "loss"),
    ("openrlhf", "entropy_loss", "entropy"),
    ("openrlhf", "ent_loss", "entropy"),
    ("openrlhf", "kl", "kl_ref"),
    ("openrlhf", "ppo_clip_ratio", "clip_frac"),
    ("openrlhf", "ppo_kl", "ppo_kl"),
    ("openrlhf", "vllm_kl", "mismatch_kl"),
    ("openrlhf", "actor_grad_norm", "grad_norm"),
    ("openrlhf", "grad_norm", "grad_norm"),
    ("openrlhf", "actor_lr", "lr"),
    ("openrlhf", "act_lr", "lr"),
    ("openrlhf", "critic_grad_norm", "critic_grad_norm"),
    ("openrlhf", "critic_lr", "critic_lr"),
    ("openrlhf", "critic_loss", "value_loss"),
    ("openrlhf", "values", "value_mean"),
    ("openrlhf", "response_length", "response_length_mean"),
    ("openrlhf", "rollout/response_length_mean", "response_length_mean"),
    ("openrlhf", "gen_len", "response_length_mean"),
    ("openrlhf", "total_length", "total_length_mean"),
    ("openrlhf", "tot_len", "total_length_mean"),
    ("openrlhf", "truncated", "truncation_ratio"),
    ("openrlhf", "rollout/truncated_rate", "truncation_ratio"),
    ("openrlhf", "timing/generation", "timing/generation"),
    ("openrlhf", "timing/make_experience", "timing/make_experience"),
    ("openrlhf", "timing/ppo_train", "timing/ppo_train"),
    ("openrlhf", "timing/broadcast", "timing/broadcast"),
    ("openrlhf", "timing/step_total", "step_time"),
    ("openrlhf", "dynamic_filtering_pass_rate", "filter_pass_rate"),
    ("openrlhf", "eval_gsm8k_pass1", "val/gsm8k_pass1"),
    ("openrlhf", "global_step", "global_step"),  # wandb `train/global_step` (frameworks.md 3.2)
    # prime-rl, prime-rl-formats.md section 2 / frameworks.md 6
    ("prime-rl", "loss/mean", "loss"),
    ("prime-rl", "entropy/all/mean", "entropy"),
    ("prime-rl", "mismatch_kl/all/mean", "mismatch_kl"),
    ("prime-rl", "ref_kl/mean", "kl_ref"),
    ("prime-rl", "optim/grad_norm", "grad_norm"),
    ("prime-rl", "optim/lr", "lr"),
    ("prime-rl", "perf/throughput", "throughput"),
    ("prime-rl", "perf/mfu", "mfu"),
    ("prime-rl", "perf/peak_memory", "peak_mem_gb"),
    ("prime-rl", "time/step", "step_time"),
    ("prime-rl", "time/wait_for_batch", "timing/wait_for_batch"),
    ("prime-rl", "time/forward_backward", "timing/forward_backward"),
    ("prime-rl", "time/wait_for_policy", "timing/wait_for_policy"),
    ("prime-rl", "train/agg/all/agent/reward/mean", "reward_mean"),
    ("prime-rl", "train/agg/all/agent/reward/std", "reward_std"),
    ("prime-rl", "train/agg/all/agent/is_truncated/mean", "truncation_ratio"),
    ("prime-rl", "train/agg/all/agent/is_trainable/mean", "trainable_frac"),
    ("prime-rl", "train/agg/all/agent/rewards/correct/mean", "reward_component/correct"),
    ("prime-rl", "train/agg/all/has_error/mean", "error_frac"),
    ("prime-rl", "train/agg/all/num_output_tokens/mean", "response_length_mean"),
    ("prime-rl", "train/agg/all/num_output_tokens/max", "response_length_max"),
    ("prime-rl", "train/agg/all/num_output_tokens/min", "response_length_min"),
    ("prime-rl", "train/agg/all/num_turns/mean", "num_turns_mean"),
    ("prime-rl", "off_policy/max", "off_policy_max"),
    ("prime-rl", "eval/gsm8k/all/agent/avg@4", "val/gsm8k/avg@4"),
    ("prime-rl", "reward/all/mean", "reward_mean"),
    ("prime-rl", "reward/all/max", "reward_max"),
    ("prime-rl", "reward/all/min", "reward_min"),
    ("prime-rl", "decode_len/all/mean", "response_length_mean"),
    ("prime-rl", "decode_len/all/max", "response_length_max"),
    ("prime-rl", "is_truncated/all/mean", "truncation_ratio"),
    ("prime-rl", "errored_rollouts/all", "error_frac"),
    ("prime-rl", "eval/gsm8k/avg@4", "val/gsm8k/avg@4"),
]

# Names frameworks.md lists that have no normalised counterpart (and must not be mistaken for one).
UNMAPPED = [
    ("verl", "perf/mfu/actor_infer"),
    ("verl", "global_seqlen/min"),
    ("verl", "timing_per_token_ms/gen"),
    ("verl", "response_length_non_aborted/mean"),
    ("trl", "clip_ratio/low_min"),
    ("trl", "val/ratio"),
    ("trl", "train_runtime"),
    ("trl", "sampling/importance_sampling_ratio/mean"),
    ("openrlhf", "logprobs_diff"),
    ("openrlhf", "rollout/num_samples"),
    ("prime-rl", "entropy/all/std"),
    ("prime-rl", "train/agg/effective/agent/reward/mean"),
]


@pytest.mark.parametrize(("framework", "raw", "name"), NAMES)
def test_each_listed_name(framework, raw, name):
    assert normalise(framework, {raw: 0.25}) == {name: 0.25}


@pytest.mark.parametrize(("framework", "raw"), UNMAPPED)
def test_unmapped_names(framework, raw):
    assert normalise(framework, {raw: 1.0}) == {}


def test_every_exact_entry_is_covered_by_the_name_table():
    listed = {(framework, raw) for framework, raw, _ in NAMES}
    missing = [(framework, raw) for framework in FRAMEWORKS for raw, _ in EXACT[framework] if (framework, raw) not in listed]
    assert missing == []


def test_first_listed_raw_name_wins():
    assert normalise("verl", {"actor/reward_kl_penalty": 5.0, "actor/kl_loss": 0.1}) == {"kl_ref": 0.1}
    assert normalise("openrlhf", {"reward": 0.3, "rollout/reward_mean": 0.4}) == {"reward_mean": 0.4}
    assert normalise("trl", {"completion_length": 100.0, "completions/mean_length": 200.0}) == {"response_length_mean": 200.0}
    assert raw_names("verl", "step_time") == ["timing_s/step", "timing/step", "perf/time_per_step"]


def test_exact_names_are_not_swallowed_by_families():
    out = normalise("verl", {"timing_s/step": 80.0, "timing_s/gen": 45.0})
    assert out == {"step_time": 80.0, "timing/gen": 45.0}


def test_tracker_tags_of_trl_and_openrlhf():
    # TB/wandb: TensorBoardCallback rewrite_logs -> train/<key>, eval_<key> -> eval/<key>
    assert normalise("trl", {"train/reward": 0.5, "train/global_step": 40, "eval/reward": 0.4}) == {
        "reward_mean": 0.5,
        "global_step": 40.0,
        "val/reward": 0.4,
    }
    assert normalise("openrlhf", {"train/policy_loss": 0.1, "eval/eval_gsm8k_pass1": 0.6}) == {
        "loss": 0.1,
        "val/gsm8k_pass1": 0.6,
    }
    # prime-rl's own train/ prefix is part of the name
    assert normalise("prime-rl", {"train/agg/all/agent/reward/mean": 0.7}) == {"reward_mean": 0.7}


def test_values_none_nan_and_non_numeric():
    out = normalise("trl", {"kl": None, "loss": math.nan, "reward": "0.5", "entropy": True})
    assert math.isnan(out["kl_ref"]) and math.isnan(out["loss"])
    assert "reward_mean" not in out and out["entropy"] == 1.0


def test_mapping_names_the_raw_key():
    assert mapping("trl", ["train/loss", "eval/loss"]) == {"loss": "train/loss", "val/loss": "eval/loss"}


def test_unknown_framework():
    with pytest.raises(ValueError):
        normalise("megatron", {})
