"""What the monitor should say about each kind of simulated run: the contract for evals.

For every failure `kind` the simulator can inject, this table records which finding ids
(reference/findings.md) a check-in at the end of the run must report (`expects`), which it
may report because they follow from the failure (`tolerates`: a truncation that erodes the
reward may also raise reward_regression), in which layouts the signal is on disk at all, and
how many steps past the onset the rules need before the signal is sustained (`lead`). Every
other id is forbidden. `Scenario.expects`, `.tolerates`, `.forbids`, `.signal_step` and
`.expected_health` read this table, so a case file can be written from a scenario alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlagent.agents.rules.catalogue import CLUSTER_IDS, FINDING_IDS

ALL_IDS: tuple[str, ...] = tuple(i for i in FINDING_IDS if i not in CLUSTER_IDS)
"""Every finding id of findings.md a single-node scenario speaks of (process_down and
kv_cache_saturated need a live check-in). The cluster ids need SLURM jobs or a multi-node tree,
which these scenarios do not have: tests/test_cluster_*.py and test_multinode.py cover them."""

INFO_IDS = frozenset({"run_finished", "reward_flat"})
DOWN_IDS = frozenset({"run_crashed", "run_stalled", "process_down"})


@dataclass(frozen=True)
class Expectation:
    expects: tuple[str, ...]
    tolerates: tuple[str, ...] = ()
    layouts: tuple[str, ...] = ("H", "L")
    """Layouts whose files carry the signal (L has no metrics.jsonl, no Trainable, no waits)."""
    lead: int = 0
    """Steps after the onset the rules need (sustain windows, smoothing) before `expects` hold."""
    ends_run: bool = False
    """The failure ends the recorded run at the onset (crash, hang): `steps` is then ignored."""


_QUIET = ("reward_flat",)
# A crash right after a checkpoint step can leave step_N with the orchestrator's part only (it
# saves at ship time, a step ahead of the trainer): a real risk the monitor rightly points out.
_CRASH = (*_QUIET, "checkpoint_failure")

EXPECTATIONS: dict[str, Expectation] = {
    "healthy": Expectation((), _QUIET),
    "entropy-collapse": Expectation(("entropy_collapse",), ("zero_advantage", "reward_flat", "reward_regression"), lead=12),
    "entropy-explosion": Expectation(
        ("entropy_explosion",), ("reward_regression", "length_explosion", "truncation_high", "reward_flat"), lead=14
    ),
    "nan": Expectation(
        ("nan_detected",),
        (
            "truncation_high",
            "length_explosion",
            "reward_regression",
            "zero_advantage",
            "reward_flat",
            "length_collapse",
            "step_time_regression",  # a broken policy writes to the length cap: longer steps
            "degenerate_output",  # ... and `!!!!` (simulator/rollouts.py), findings.md's example
        ),
    ),
    "crash-oom": Expectation(("run_crashed", "cuda_oom"), _CRASH, ends_run=True),
    "crash-nccl": Expectation(("run_crashed", "nccl_error"), (*_CRASH, "trainer_bottleneck"), ends_run=True),
    "crash-python": Expectation(("run_crashed",), _CRASH, ends_run=True),
    "host-oom": Expectation(("run_crashed", "host_oom"), _CRASH, layouts=("H",), ends_run=True),
    "truncation": Expectation(
        ("truncation_high",), ("reward_regression", "length_explosion", "step_time_regression", "reward_flat"), lead=10
    ),
    "zero-advantage": Expectation(("zero_advantage",), _QUIET, layouts=("H",), lead=8),
    "reward-constant": Expectation(("reward_constant", "zero_advantage"), ("reward_regression", "reward_flat"), lead=12),
    "env-errors": Expectation(("env_errors",), (*_QUIET, "errored_rollouts_high"), lead=6),
    "errored-rollouts": Expectation(("errored_rollouts_high",), (*_QUIET, "env_errors"), layouts=("H",), lead=8),
    "orchestrator-bottleneck": Expectation(
        ("orchestrator_bottleneck",), (*_QUIET, "step_time_regression"), layouts=("H",), lead=8
    ),
    "trainer-bottleneck": Expectation(("trainer_bottleneck",), (*_QUIET, "step_time_regression"), layouts=("H",), lead=8),
    "grad-spike": Expectation(("grad_norm_spike",), _QUIET, lead=4),
    "length-collapse": Expectation(
        ("length_collapse",), (*_QUIET, "reward_regression", "trainer_bottleneck"), layouts=("H",), lead=5
    ),
    "length-explosion": Expectation(
        ("length_explosion",), (*_QUIET, "truncation_high", "reward_regression", "step_time_regression"), layouts=("H",), lead=12
    ),
    "reward-regression": Expectation(("reward_regression",), _QUIET, lead=22),
    "reward-flat": Expectation(("reward_flat",), (), lead=62),
    "eval-regression": Expectation(("eval_regression",), _QUIET, lead=26),
    "mismatch-kl": Expectation(("mismatch_kl_growth",), (*_QUIET, "reward_regression"), lead=14),
    "kl-blowup": Expectation(("kl_blowup",), (*_QUIET, "reward_regression"), layouts=("H",), lead=14),
    # L's own texts: `Attempt i/3 ... filtered out all n rollouts`, `Cancelled n old rollout requests`
    "empty-batches": Expectation(
        ("empty_batches",),
        (*_QUIET, "orchestrator_bottleneck", "step_time_regression", "zero_advantage"),
        lead=4,
    ),
    "off-policy-drops": Expectation(("off_policy_drops",), _QUIET, lead=10),
    "checkpoint-failure": Expectation(("checkpoint_failure",), _QUIET, lead=12),
    "disk-low": Expectation(("disk_low",), _QUIET, layouts=("H",), lead=10),
    "inference-unreachable": Expectation(
        ("inference_unreachable", "run_crashed"), (*_CRASH, "env_errors", "errored_rollouts_high"), ends_run=True
    ),
    "step-time-regression": Expectation(("step_time_regression",), (*_QUIET,), lead=8),
    "stall": Expectation(("run_stalled",), (*_QUIET, "trainer_bottleneck"), ends_run=True),
}
