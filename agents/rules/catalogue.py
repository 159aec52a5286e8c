"""The finding ids of reference/findings.md: a public contract (report, STATUS.md, evals).

Add an id when a new condition deserves one; never rename one.
"""

FINDING_IDS: tuple[str, ...] = (
    "run_crashed",
    "process_down",
    "run_stalled",
    "cuda_oom",
    "host_oom",
    "nccl_error",
    "inference_unreachable",
    "env_errors",
    "checkpoint_failure",
    "disk_low",
    "run_finished",
    "reward_flat",
    "reward_regression",
    "reward_constant",
    "zero_advantage",
    "truncation_high",
    "length_collapse",
    "length_explosion",
    "errored_rollouts_high",
    "empty_batches",
    "eval_regression",
    "nan_detected",
    "entropy_collapse",
    "entropy_explosion",
    "mismatch_kl_growth",
    "grad_norm_spike",
    "kl_blowup",
    "orchestrator_bottleneck",
    "trainer_bottleneck",
    "kv_cache_saturated",
    "step_time_regression",
    "off_policy_drops",
)
