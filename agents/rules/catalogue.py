"""The finding ids of reference/findings.md and their categories: a public contract (report,
STATUS.md, evals), and `finding()`, how every rule builds one.

Add an id when a new condition deserves one; never rename one.
"""

from __future__ import annotations

from collections.abc import Iterable

from rlagent.models.findings import Finding
from rlagent.models.run import Category, Severity

CATALOGUE: dict[str, Category] = {
    "run_crashed": Category.HEALTH,
    "process_down": Category.HEALTH,
    "run_stalled": Category.HEALTH,
    "cuda_oom": Category.HEALTH,
    "host_oom": Category.HEALTH,
    "nccl_error": Category.HEALTH,
    "inference_unreachable": Category.HEALTH,
    "env_errors": Category.HEALTH,
    "checkpoint_failure": Category.HEALTH,
    "disk_low": Category.HEALTH,
    "run_finished": Category.HEALTH,
    "reward_flat": Category.PROGRESS,
    "reward_regression": Category.PROGRESS,
    "reward_constant": Category.PROGRESS,
    "zero_advantage": Category.PROGRESS,
    "truncation_high": Category.PROGRESS,
    "length_collapse": Category.PROGRESS,
    "length_explosion": Category.PROGRESS,
    "errored_rollouts_high": Category.PROGRESS,
    "empty_batches": Category.PROGRESS,
    "eval_regression": Category.PROGRESS,
    "nan_detected": Category.STABILITY,
    "entropy_collapse": Category.STABILITY,
    "entropy_explosion": Category.STABILITY,
    "mismatch_kl_growth": Category.STABILITY,
    "grad_norm_spike": Category.STABILITY,
    "kl_blowup": Category.STABILITY,
    "orchestrator_bottleneck": Category.PERFORMANCE,
    "trainer_bottleneck": Category.PERFORMANCE,
    "kv_cache_saturated": Category.PERFORMANCE,
    "step_time_regression": Category.PERFORMANCE,
    "off_policy_drops": Category.PERFORMANCE,
    # clusters: SLURM jobs and multi-node logs
    "slurm_job_failed": Category.HEALTH,
    "slurm_timeout": Category.HEALTH,
    "slurm_oom": Category.HEALTH,
    "node_fail": Category.HEALTH,
    "slurm_pending": Category.HEALTH,
    "slurm_preempted": Category.HEALTH,
    "time_limit_risk": Category.HEALTH,
    "rank_failed": Category.HEALTH,
    "node_silent": Category.HEALTH,
}
"""Every finding id of reference/findings.md, with its category (a public contract: never renamed)."""

FINDING_IDS: tuple[str, ...] = tuple(CATALOGUE)

CLUSTER_IDS: tuple[str, ...] = (
    "slurm_job_failed", "slurm_timeout", "slurm_oom", "node_fail", "slurm_pending", "slurm_preempted", "time_limit_risk",
    "rank_failed", "node_silent",
)  # fmt: skip
"""Ids that need a live SLURM probe or a multi-node log tree (agents/rules/cluster.py)."""


def finding(
    id: str,
    severity: Severity,
    summary: str,
    evidence: Iterable[str] = (),
    *,
    first_step: int | None = None,
    last_step: int | None = None,
    source: str = "rules",
) -> Finding:
    """A finding of the catalogue: its category comes from the id (a KeyError for an unknown id)."""
    return Finding(
        id=id,
        severity=severity,
        category=CATALOGUE[id],
        summary=summary,
        evidence=list(evidence),
        first_step=first_step,
        last_step=last_step,
        source=source,  # type: ignore[arg-type]
    )
