"""Canonical metric names, and how both layouts' step lines and metrics.jsonl keys map to them.

Rules speak only canonical names, so they work the same on H and L runs and on the log or
the JSONL as the source. Percentages are stored as fractions (Truncation 3.1% -> 0.031).

trainer:      loss entropy mismatch_kl grad_norm lr throughput mfu peak_mem_gib step_time
              wait_for_batch ref_kl ckpt_disk_free_ratio
orchestrator: reward reward_min reward_max trainable turns branches off_policy_max error
              cancelled truncation seq_len output_tokens step_time wait_for_policy
"""

from __future__ import annotations

import re

from rlagent.tools.bounds import NUMBER

# Step-line segment label -> canonical name, per process (both layouts' spellings).
TRAINER_LINE_KEYS: dict[str, str] = {
    "Loss": "loss",
    "Entropy": "entropy",
    "Mismatch KL": "mismatch_kl",
    "Grad. Norm": "grad_norm",
    "LR": "lr",
    "Throughput": "throughput",
    "MFU": "mfu",
    "Peak Mem.": "peak_mem_gib",
    "Time": "step_time",
}
ORCHESTRATOR_LINE_KEYS: dict[str, str] = {
    "Reward": "reward",
    "Trainable": "trainable",
    "Turns": "turns",
    "Branches": "branches",
    "Max Off-Policy": "off_policy_max",
    "Max. Off-Policy Level": "off_policy_max",
    "Error": "error",
    "Cancelled": "cancelled",
    "Truncation": "truncation",
    "Seq. Length": "seq_len",
    "Time": "step_time",
}
# Labels that only the trainer's step line has: they tell which process wrote a line
# when the file name does not (e.g. a SLURM job log).
TRAINER_ONLY_LABELS = frozenset({"Loss", "Entropy", "Grad. Norm", "LR", "Throughput"})

# metrics.jsonl (layout H) key -> canonical name.
TRAINER_JSONL_KEYS: dict[str, str] = {
    "loss/mean": "loss",
    "entropy/all/mean": "entropy",
    "mismatch_kl/all/mean": "mismatch_kl",
    "optim/grad_norm": "grad_norm",
    "optim/lr": "lr",
    "perf/throughput": "throughput",
    "perf/peak_memory": "peak_mem_gib",
    "time/step": "step_time",
    "time/wait_for_batch": "wait_for_batch",
    "ref_kl/mean": "ref_kl",
    "system/ckpt_disk_free_ratio": "ckpt_disk_free_ratio",
}
ORCHESTRATOR_JSONL_KEYS: dict[str, str] = {
    "train/agg/all/has_error/mean": "error",
    "train/agg/all/cancelled/mean": "cancelled",
    "train/agg/all/num_output_tokens/mean": "output_tokens",
    "train/agg/all/num_total_tokens/mean": "seq_len",
    "train/agg/all/num_turns/mean": "turns",
    "off_policy/max": "off_policy_max",
    "time/step": "step_time",
    "time/wait_for_policy": "wait_for_policy",
}
# Per-agent keys: train/agg/all/<agent>/<metric>.
ORCHESTRATOR_AGENT_KEYS: dict[str, str] = {
    "reward/mean": "reward",
    "reward/min": "reward_min",
    "reward/max": "reward_max",
    "is_truncated/mean": "truncation",
    "is_trainable/mean": "trainable",
}
_AGENT_KEY = re.compile(r"^train/agg/all/([^/]+)/(reward/(?:mean|min|max)|is_truncated/mean|is_trainable/mean)$")
_EVAL_KEY = re.compile(r"^eval/([^/]+)/all/[^/]+/(avg@\d+|reward/mean)$")

# A row is the orchestrator's when it has any key with one of these prefixes.
_ORCHESTRATOR_PREFIXES = ("train/", "progress/", "off_policy", "time/wait_for_policy", "batch/", "curriculum/")


def is_orchestrator_row(row: dict) -> bool:
    return any(key.startswith(_ORCHESTRATOR_PREFIXES) for key in row)


def canonical_plan(keys: tuple[str, ...], orchestrator: bool) -> tuple[tuple[str, str], ...]:
    """The (key, canonical name) pairs a row with these keys maps, in the order they are set (a
    later pair overwrites): the known keys in table order, then the per-agent `train/agg/all/`
    keys in the row's order. Orchestrator rows have hundreds of keys and a run writes rows of a
    few shapes: a caller can work this out once per shape (tools.metrics_jsonl)."""
    present = set(keys)
    table = ORCHESTRATOR_JSONL_KEYS if orchestrator else TRAINER_JSONL_KEYS
    pairs = [(key, name) for key, name in table.items() if key in present]
    if orchestrator:
        for key in keys:
            if key.startswith("train/agg/all/") and (match := _AGENT_KEY.match(key)):
                pairs.append((key, ORCHESTRATOR_AGENT_KEYS[match.group(2)]))
    return tuple(pairs)


def canonical_values(row: dict, plan: tuple[tuple[str, str], ...]) -> dict[str, float]:
    """The row's numeric values under their canonical names, by a plan of canonical_plan."""
    out: dict[str, float] = {}
    for key, name in plan:
        value = row[key]
        if isinstance(value, NUMBER) and value.__class__ is not bool:
            out[name] = float(value)
    return out


def eval_scores(row: dict) -> dict[str, float]:
    """env -> score from an eval row (avg@k preferred over reward/mean)."""
    scores: dict[str, tuple[int, float]] = {}
    for key, value in row.items():
        match = _EVAL_KEY.match(key)
        if not match or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        rank = 0 if match.group(2).startswith("avg@") else 1
        env = match.group(1)
        if env not in scores or rank < scores[env][0]:
            scores[env] = (rank, float(value))
    return {env: value for env, (_, value) in scores.items()}


# Other frameworks: the normalised vocabulary of tools/frameworks/vocabulary.py -> (process, canonical
# name). A framework's one step line holds both sides; they are split the way prime-rl splits them
# (trainer: optimisation and policy statistics; orchestrator: rollouts and rewards) so that every rule
# reads the same table whatever wrote the run. Metrics prime-rl lacks get names of their own here.
FRAMEWORK_CANONICAL: dict[str, tuple[str, str]] = {
    "reward_mean": ("orchestrator", "reward"),
    "reward_std": ("orchestrator", "reward_std"),
    "reward_max": ("orchestrator", "reward_max"),
    "reward_min": ("orchestrator", "reward_min"),
    "reward_group_std": ("orchestrator", "reward_group_std"),
    "trainable_frac": ("orchestrator", "trainable"),
    "error_frac": ("orchestrator", "error"),
    "truncation_ratio": ("orchestrator", "truncation"),
    "response_length_mean": ("orchestrator", "output_tokens"),
    "response_length_max": ("orchestrator", "output_tokens_max"),
    "total_length_mean": ("orchestrator", "seq_len"),
    "aborted_ratio": ("orchestrator", "aborted"),
    "filter_pass_rate": ("orchestrator", "filter_pass_rate"),
    "off_policy_max": ("orchestrator", "off_policy_max"),
    "loss": ("trainer", "loss"),
    "entropy": ("trainer", "entropy"),
    "kl_ref": ("trainer", "ref_kl"),
    "kl_coef": ("trainer", "kl_coef"),
    "ppo_kl": ("trainer", "ppo_kl"),
    "mismatch_kl": ("trainer", "mismatch_kl"),
    "clip_frac": ("trainer", "clip_frac"),
    "grad_norm": ("trainer", "grad_norm"),
    "lr": ("trainer", "lr"),
    "value_loss": ("trainer", "value_loss"),
    "value_mean": ("trainer", "value_mean"),
    "explained_var": ("trainer", "explained_var"),
    "critic_grad_norm": ("trainer", "critic_grad_norm"),
    "step_time": ("trainer", "step_time"),
    "throughput": ("trainer", "throughput"),
    "mfu": ("trainer", "mfu"),
    "peak_mem_gb": ("trainer", "peak_mem_gib"),
}
"""Normalised name -> (process, canonical name). Also: `zero_std_frac` -> orchestrator `trainable` =
1 - zero_std_frac; `reward_component/<f>` -> orchestrator `reward_component/<f>`; `val/<name>` -> evals."""


# eval keys that describe the eval, not its score (OpenRLHF logs lengths and counts beside `*_pass1`)
_NOT_A_SCORE = re.compile(r"length|truncat|num_samples|runtime|per_second|_loss$|epoch")


def canonical_split(normalised: dict[str, float]) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """(trainer, orchestrator, evals) canonical values of one step's normalised metrics."""
    trainer: dict[str, float] = {}
    orchestrator: dict[str, float] = {}
    evals: dict[str, float] = {}
    for name, value in normalised.items():
        target = FRAMEWORK_CANONICAL.get(name)
        if target is not None:
            (trainer if target[0] == "trainer" else orchestrator)[target[1]] = value
        elif name == "zero_std_frac":
            orchestrator.setdefault("trainable", 1.0 - value)
        elif name.startswith(("reward_component/", "reward_component_std/")):
            orchestrator[name] = value
        elif name.startswith("val/") and not name.startswith("val/aux/") and not _NOT_A_SCORE.search(name):
            evals[name[len("val/") :]] = value
    return trainer, orchestrator, evals
