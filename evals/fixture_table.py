"""The case table of the simulated-run fixtures under evals/fixtures/: one `Spec` row per fixture
(data; evals/make_fixtures.py builds them).

Each row is a simulator scenario and its variant (`changes`, shrunk so a fixture stays about
1 MB), the messy edits that make its files look like a real run's (messy.py), the check-in
schedule, and the findings it must produce (a `Want` per expected id, evals/fixture_signals.py). Health per
check-in follows: Healthy before the signal, either answer while it is still ambiguous, the
failure's health once it is not (and Healthy again after a resume the run came back from).

To add a fixture, add a row: a scenario of `SCENARIOS` as the base, `changes` for its variant,
`edits` from messy.py, and a `Want` per expected id whose `settle` says when its signal is
unambiguous (`sustained(...)` for a threshold held k steps, `after_onset(lead)` for a fixed lead,
or a function of the recording). A `scenario_row` shows a simulator scenario as it is: its allow
and forbid lists are the scenario's own `tolerates` / `forbids`, its expected ids must be exactly
the scenario's `expects`, and health follows each finding (Down for a crash or stall, Degraded
for a warning, so a run can be Degraded first and Down later). Every scenario has one, in each
layout whose files show its failure (a test checks).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

from rlagent.evals import messy
from rlagent.evals.fixture_signals import (
    ENTROPY,
    ENTROPY_UP,
    ERRORED,
    ERRORED_FROM_ONSET,
    KL_BLOWUP,
    LENGTH_EXPLOSION,
    MISMATCH_KL,
    ORCH_BOTTLENECK,
    REWARD_CONSTANT,
    TRAINER_BOTTLENECK,
    TRUNCATION,
    ZERO_ADVANTAGE,
    Want,
    after_onset,
    checkpoint_incomplete,
    checkpoint_lag,
    crash_line,
    disk_below,
    drops_growing,
    env_error_share,
    env_errors_from,
    eval_falls,
    failure_logged,
    finished_line,
    grad_spike,
    length_collapse,
    nan_step,
    reward_falls,
    reward_flat_for,
    stalled,
    step_time_up,
    unreachable_after_start,
)
from rlagent.evals.messy import Recording
from rlagent.models.run import Health

NORMAL_LOOKING = ("inference_unreachable", "nccl_error", "grad_norm_spike")
"""What the alarming-but-normal lines of every run would wrongly raise (findings.md)."""
NOT_CRASHED = ("run_crashed", "cuda_oom", "host_oom", "process_down")
QUIET = (*NORMAL_LOOKING, *NOT_CRASHED, "run_stalled", "env_errors", "errored_rollouts_high", "checkpoint_failure")
"""Forbidden on a healthy run."""


@dataclass(frozen=True)
class Spec:
    slug: str
    scenario: str
    title: str
    difficulty: str = "easy"
    changes: Mapping[str, object] = field(default_factory=dict)
    edits: Sequence[Callable[[Recording], None]] = ()
    every: int = 10
    """A check-in every this many trainer steps..."""
    tail: Sequence[float] = ()
    """... then check-ins this many seconds after the recording ends."""
    at_marks: Sequence[tuple[str, float]] = ()
    """Check-ins at `Recording.marks[name] + seconds` (e.g. between a crash and its resume)."""
    expect: Sequence[Want] = ()
    allow: Sequence[str] = ()
    forbid: Sequence[str] = QUIET
    bad: Health = Health.DEGRADED
    """The health once the failure is unambiguous."""
    recovers: str | None = None
    """A `Recording.marks` name after which the run is Healthy again (a resume)."""
    description: str = ""
    contract: bool = False
    """Allow and forbid come from the scenario (`Scenario.tolerates` / `.forbids`), and the
    expected ids must be exactly its `expects`: a row that shows a simulator scenario as it is."""


WARNINGS_H = partial(
    messy.warnings,
    stream_name="orchestrator",
    lines=[
        # prime-rl's exact texts (dispatcher.py, train_sink.py); a one-off drop is normal
        (12, 3.0, "WARNING", "Cancelled 4 train episodes past max_off_policy_steps=8. Consider increasing it to avoid this."),
        (26, 5.0, "WARNING", "Dropped 2 queued traces past max_off_policy_steps=8. Consider increasing it to avoid this."),
    ],
)
VLLM_PREEMPT = partial(
    messy.vllm_warnings,
    lines=[
        (
            8,
            4.0,
            "[scheduler.py:1560] Sequence group 7 is preempted by PreemptionMode.RECOMPUTE mode because "
            "there is not enough KV cache space. total_num_cumulative_preemption=1",
        ),
        (
            21,
            6.0,
            "[scheduler.py:1560] Sequence group 31 is preempted by PreemptionMode.RECOMPUTE mode because "
            "there is not enough KV cache space. total_num_cumulative_preemption=2",
        ),
    ],
)
CKPT_REMOVE_WARNING = partial(
    messy.warnings,
    stream_name="trainer",
    lines=[
        (
            21,
            1.5,
            "WARNING",
            "Failed to remove /workspace/prime-rl/outputs/ckpt-tmp/step_10: [Errno 39] Directory not empty, skipping cleanup",
        )
    ],
)
DIRTY_BYTES = (
    partial(messy.binary_junk, stream_name="orchestrator", step=14),
    partial(messy.torn_metrics_row, step=22),
    partial(messy.truncated_last_line, stream_name="orchestrator"),
)

ENTROPY_WANT = Want("entropy_collapse", ENTROPY, why="entropy decays to a few % of its early value")
NAN_WANT = Want("nan_detected", nan_step, why="the trainer's step line prints nan (metrics.jsonl drops it)")
CRASH_WANTS = (
    Want("run_crashed", crash_line, "critical", why="`Fatal error in train` and torchrun's ChildFailedError"),
    Want("cuda_oom", crash_line, "critical", why="torch.OutOfMemoryError in loss.backward()"),
)
TRUNC_WANT = Want("truncation_high", TRUNCATION, why="over half the completions hit max_completion_tokens")
ERROR_WANTS = (
    Want("errored_rollouts_high", ERRORED, why="Error x% above 5% on every step"),
    Want("env_errors", env_error_share, why="`Trace failed in group` / `Rollout error in group` for over 5% of rollouts"),
)
STALL_WANT = Want("run_stalled", stalled, "critical", why="no step for longer than max(10 min, 3 x step time)")


# One row per simulator scenario (`contract=True`): allow and forbid are the scenario's own
# `tolerates` / `forbids`, and the expected ids must be exactly its `expects`.
def scenario_row(
    slug: str,
    scenario: str,
    title: str,
    *expect: Want,
    difficulty: str = "easy",
    changes: Mapping[str, object] | None = None,
    every: int = 5,
    tail: Sequence[float] = (),
    description: str = "",
) -> Spec:
    return Spec(
        slug,
        scenario,
        title,
        difficulty=difficulty,
        changes=changes or {},
        every=every,
        tail=tail,
        expect=expect,
        contract=True,
        description=description,
    )


FINISHED_WANT = Want("run_finished", finished_line, "info", why="`RL training finished!` / `Orchestrator finished.`")
EXPLOSION_WANT = Want("entropy_explosion", ENTROPY_UP, why="entropy above 2x its early median and still rising")
GRAD_WANT = Want("grad_norm_spike", grad_spike, why="grad norm over 10x its rolling median on consecutive steps")
MISMATCH_WANT = Want("mismatch_kl_growth", MISMATCH_KL, why="mismatch KL above 10x its early median, sustained")
KL_WANT = Want("kl_blowup", KL_BLOWUP, why="ref_kl in metrics.jsonl above 100x its early median (floored) for 3 steps")
NCCL_WANTS = (
    Want("run_crashed", failure_logged, "critical", why="the NCCL watchdog aborts rank 0 (SIGABRT), torchrun's ChildFailedError"),
    Want("nccl_error", failure_logged, "critical", why="`Watchdog caught collective operation timeout` after 600 s"),
)
PYTHON_CRASH_WANT = Want("run_crashed", failure_logged, "critical", why="`Fatal error in run_orchestrator`, KeyError in scoring")
HOST_OOM_WANTS = (
    Want("run_crashed", failure_logged, "critical", why="`Error: Trainer failed with exit code -9` in job_<id>.log"),
    Want("host_oom", failure_logged, "critical", why="exit code -9 (SIGKILL) and slurmstepd's `oom_kill event` line"),
)
UNREACHABLE_WANTS = (
    Want("inference_unreachable", unreachable_after_start, why="`Inference server was not reached` after the first step"),
    Want("run_crashed", failure_logged, "critical", why="`Inference server is not ready after 1800 seconds. Aborting...`"),
)
CKPT_ERROR_WANT = Want("checkpoint_failure", checkpoint_incomplete, why="step_N from the onset lack trainer/.metadata")
DISK_WANT = Want("disk_low", disk_below, why="system/ckpt_disk_free_ratio under 10%")
ENV_WANT = Want("env_errors", env_errors_from(None), why="failed episodes over 5% of the rollouts of the last 10 steps")
ZERO_WANT = Want("zero_advantage", ZERO_ADVANTAGE, why="Trainable under 25% for 5 steps")
CONSTANT_WANT = Want("reward_constant", REWARD_CONSTANT, why="every rollout scores 0 (reward min = max) for 10 steps")
ERRORED_WANT = Want("errored_rollouts_high", ERRORED_FROM_ONSET, why="Error above 5% for 5 steps")
LENGTH_COLLAPSE_WANT = Want("length_collapse", length_collapse, why="completion length under half its median before the drop")
LENGTH_EXPLOSION_WANT = Want("length_explosion", LENGTH_EXPLOSION, why="completion length above 90% of max_completion_tokens")
REGRESSION_WANT = Want("reward_regression", reward_falls, why="the 10-step reward level 20% below its peak for 10 steps")
FLAT_WANT = Want("reward_flat", reward_flat_for, "info", why="the reward level no higher than 50 steps earlier")
EVAL_WANT = Want("eval_regression", eval_falls, why="eval avg@k lower at 3 evals in a row while the train reward rises")
EMPTY_WANT = Want(
    "empty_batches", after_onset(0, "orchestrator"), why="`No admitted train payload`, `empty train batch after ...`"
)
ORCH_WANT = Want("orchestrator_bottleneck", ORCH_BOTTLENECK, why="the trainer waits for batches over half its step")
TRAINER_WANT = Want("trainer_bottleneck", TRAINER_BOTTLENECK, why="the orchestrator waits for policies over half its step")
STEP_TIME_WANT = Want("step_time_regression", step_time_up, why="step time above 1.5x its median before the slowdown")
OFF_POLICY_WANT = Want("off_policy_drops", drops_growing, why="`Cancelled N train episodes` / `Dropped N queued traces`, growing")

# Consequences a failure really causes in the data (not false alarms): a collapse makes groups
# identical (zero advantage), a NaN breaks the policy (rewards 0, outputs run to the cap, `!!!!` in
# the saved samples: degenerate output, as findings.md's own example and the TRL NaN row have it).
AFTER_COLLAPSE = ("zero_advantage",)
# Completions that run to the cap also make generation and training slower (step time x2-3).
AFTER_NAN = (
    "reward_regression",
    "truncation_high",
    "length_explosion",
    "zero_advantage",
    "eval_regression",
    "entropy_collapse",
    "step_time_regression",
    "degenerate_output",
)
AFTER_TRUNCATION = ("length_explosion", "reward_regression", "eval_regression", "step_time_regression")
BIG_BATCH = {"batch_size": 64, "rollout_steps_kept": 0}
"""Rates of a few % need real batch sizes (at 16 rollouts one failure is already 6 %); no saved
rollouts keeps such a fixture near 1 MB (H traces of 64 rollouts are 500 KB a step)."""

TABLE: tuple[Spec, ...] = (
    # --- healthy and alarming-but-normal ---------------------------------------------------------
    Spec("01_healthy-h", "healthy-h", "healthy run, layout H (startup `not reached`, NVLink, paused lines, one grad spike)"),
    Spec("02_healthy-l", "healthy-l", "healthy run, layout L"),
    Spec("03_healthy-multienv-h", "healthy-multienv-h", "healthy run with two train envs, layout H", changes={"steps": 30}),
    Spec(
        "04_finished-h",
        "finished-h",
        "run that finishes cleanly, layout H",
        changes={"steps": 40, "max_steps": 40},
        expect=(Want("run_finished", finished_line, "info", why="`RL trainer finished!`"),),
        tail=(0.0,),
    ),
    Spec(
        "05_finished-l",
        "finished-h",
        "run that finishes cleanly, layout L",
        changes={"layout": "L", "steps": 40, "max_steps": 40, "seed": 41},
        expect=(Want("run_finished", finished_line, "info", why="`RL trainer finished!`"),),
        tail=(0.0,),
    ),
    Spec(
        "06_healthy-h-new-york-midnight",
        "healthy-h",
        "healthy run logged in America/New_York local time, crossing local midnight",
        difficulty="medium",
        changes={"log_tz": "America/New_York", "start": datetime(2026, 8, 25, 3, 40, tzinfo=UTC), "seed": 61},
    ),
    Spec(
        "07_healthy-l-utc-midnight",
        "healthy-l",
        "healthy run crossing midnight UTC, layout L",
        difficulty="medium",
        changes={"start": datetime(2026, 5, 21, 23, 35, tzinfo=UTC), "seed": 71},
    ),
    Spec(
        "08_healthy-h-noisy",
        "healthy-h",
        "healthy run with 3% failed traces and interleaved normal warnings (cancelled, few trainable, vLLM preemption)",
        difficulty="medium",
        changes={"trace_fail_rate": 0.03, "seed": 81, "steps": 40, **BIG_BATCH},
        edits=(WARNINGS_H, VLLM_PREEMPT, CKPT_REMOVE_WARNING),
    ),
    Spec(
        "09_healthy-h-planned-restart",
        "healthy-h",
        "run stopped at step 34 and resumed from checkpoint 30 (logs/attempt_2)",
        difficulty="medium",
        changes={"steps": 34, "seed": 91},
        edits=(partial(messy.restart, resume_step=30, gap_s=240.0, steps=55),),
    ),
    Spec(
        "10_healthy-l-rotated-junk",
        "healthy-l",
        "healthy run whose trainer.log is rotated mid-run, with binary junk and a truncated last line",
        difficulty="medium",
        changes={"seed": 101},
        edits=(
            partial(messy.rotate, stream_name="trainer", step=27),
            partial(messy.binary_junk, stream_name="orchestrator", step=33),
            partial(messy.truncated_last_line, stream_name="trainer"),
        ),
    ),
    Spec(
        "11_healthy-h-dirty-bytes",
        "healthy-h",
        "healthy run with binary junk, a torn metrics.jsonl row and a truncated last line",
        difficulty="medium",
        changes={"seed": 111},
        edits=DIRTY_BYTES,
    ),
    Spec(
        "12_healthy-h-two-gpus",
        "healthy-h",
        "healthy run on 2 trainer GPUs (torchrun's un-prefixed OMP banner opens trainer.log)",
        changes={"trainer_gpus": 2, "seed": 121, "steps": 50},
    ),
    # --- failures ---------------------------------------------------------------------------------
    Spec(
        "13_entropy-collapse-h",
        "entropy-collapse-h",
        "entropy collapses from step 25, layout H",
        every=5,
        expect=(ENTROPY_WANT,),
        allow=AFTER_COLLAPSE,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED, "nan_detected"),
    ),
    Spec(
        "14_entropy-collapse-l",
        "entropy-collapse-h",
        "entropy collapses from step 25, layout L",
        changes={"layout": "L", "seed": 141},
        expect=(ENTROPY_WANT,),
        allow=AFTER_COLLAPSE,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED, "nan_detected"),
    ),
    Spec(
        "15_entropy-collapse-h-slow",
        "entropy-collapse-h",
        "entropy collapses slowly (severity 0.5) from step 20, layout H",
        difficulty="medium",
        changes={"severity": 0.5, "onset_step": 20, "seed": 151},
        expect=(ENTROPY_WANT,),
        allow=AFTER_COLLAPSE,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED, "nan_detected"),
    ),
    Spec(
        "16_nan-h",
        "nan-h",
        "NaN from step 28, layout H (metrics.jsonl drops it, the log shows it)",
        every=5,
        expect=(NAN_WANT,),
        allow=AFTER_NAN,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED),
    ),
    Spec(
        "17_nan-l",
        "nan-h",
        "NaN from step 28, layout L",
        changes={"layout": "L", "seed": 171},
        expect=(NAN_WANT,),
        allow=AFTER_NAN,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED),
    ),
    Spec(
        "18_nan-h-sporadic-dirty",
        "nan-h",
        "sporadic NaN (30% of steps after 24) in a log with junk bytes and interleaved warnings",
        difficulty="medium",
        changes={"severity": 0.3, "onset_step": 24, "seed": 181},
        edits=(WARNINGS_H, *DIRTY_BYTES),
        expect=(NAN_WANT,),
        allow=AFTER_NAN,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED),
    ),
    Spec(
        "19_crash-oom-h",
        "crash-oom-h",
        "CUDA OOM kills the trainer at step 23, layout H",
        every=5,
        tail=(0.0, 600.0),
        expect=CRASH_WANTS,
        bad=Health.DOWN,
        forbid=NORMAL_LOOKING,
    ),
    Spec(
        "20_crash-oom-l",
        "crash-oom-h",
        "CUDA OOM kills the trainer at step 23, layout L",
        changes={"layout": "L", "seed": 201},
        every=5,
        tail=(0.0, 600.0),
        expect=CRASH_WANTS,
        bad=Health.DOWN,
        forbid=NORMAL_LOOKING,
    ),
    Spec(
        "21_crash-oom-h-resumed",
        "crash-oom-h",
        "CUDA OOM at step 23, relaunched 6 min later with --resume from step 20 (logs/attempt_2)",
        difficulty="medium",
        changes={"seed": 211},
        edits=(partial(messy.restart, resume_step=20, gap_s=360.0, steps=50),),
        every=5,
        at_marks=(("stop", 60.0), ("stop", 300.0)),
        expect=CRASH_WANTS,
        bad=Health.DOWN,
        recovers="relaunch",
        forbid=NORMAL_LOOKING,
    ),
    Spec(
        "22_truncation-l",
        "truncation-l",
        "completions run into max_completion_tokens from step 15, layout L",
        changes={"steps": 45, "onset_step": 15, "rollout_steps_kept": 36},
        every=5,
        expect=(TRUNC_WANT,),
        allow=AFTER_TRUNCATION,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED),
    ),
    Spec(
        "23_truncation-h",
        "truncation-l",
        "completions run into max_completion_tokens from step 20, layout H",
        changes={"layout": "H", "seed": 231, "steps": 50},
        expect=(TRUNC_WANT,),
        allow=AFTER_TRUNCATION,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED),
    ),
    Spec(
        "24_truncation-h-mild",
        "truncation-l",
        "truncation climbs to ~60% (severity 0.4) from step 12, layout H",
        difficulty="medium",
        changes={"layout": "H", "seed": 241, "steps": 55, "onset_step": 12, "severity": 0.4},
        expect=(TRUNC_WANT,),
        allow=AFTER_TRUNCATION,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED),
    ),
    Spec(
        "25_errored-rollouts-h",
        "healthy-h",
        "12% of episodes fail (env timeouts) from the start, layout H",
        difficulty="medium",
        changes={"trace_fail_rate": 0.12, "seed": 251, "steps": 40, **BIG_BATCH},
        expect=ERROR_WANTS,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED),
    ),
    Spec(
        "26_errored-rollouts-l",
        "healthy-l",
        "12% of rollouts fail from the start, layout L (only `Rollout error in group` lines show it)",
        difficulty="medium",
        changes={"trace_fail_rate": 0.12, "seed": 261, "steps": 40, "batch_size": 64},
        expect=ERROR_WANTS[1:],
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED),
    ),
    Spec(
        "27_stall-h",
        "healthy-h",
        "the trainer hangs after step 30 while the orchestrator keeps logging its pipeline view",
        difficulty="medium",
        changes={"steps": 30, "seed": 271},
        edits=(partial(messy.hang, minutes=40),),
        tail=(-35 * 60.0, -25 * 60.0, -10 * 60.0, 0.0),
        expect=(STALL_WANT,),
        bad=Health.DOWN,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED),
    ),
    Spec(
        "28_stall-l",
        "healthy-l",
        "the trainer hangs after step 30, layout L (the orchestrator pauses, vLLM idles)",
        difficulty="medium",
        changes={"steps": 30, "seed": 281},
        edits=(partial(messy.hang, minutes=40),),
        tail=(-35 * 60.0, -25 * 60.0, -10 * 60.0, 0.0),
        expect=(STALL_WANT,),
        bad=Health.DOWN,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED),
    ),
    Spec(
        "29_checkpoint-silent-h",
        "healthy-h",
        "orchestrator checkpoints stop landing from step 30 without a word, layout H",
        difficulty="medium",
        changes={"seed": 291, "steps": 50},
        edits=(partial(messy.drop_checkpoint_part, from_step=30),),
        every=5,
        expect=(Want("checkpoint_failure", checkpoint_lag(30), why="step_30+ lack orchestrator/progress.pt"),),
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED),
    ),
    Spec(
        "30_checkpoint-silent-l",
        "healthy-l",
        "orchestrator checkpoints stop landing from step 30 without a word, layout L",
        changes={"seed": 301, "steps": 50},
        edits=(partial(messy.drop_checkpoint_part, from_step=30),),
        every=5,
        expect=(Want("checkpoint_failure", checkpoint_lag(30), why="step_30+ lack orchestrator/progress.pt"),),
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED),
    ),
    Spec(
        "31_disk-low-h",
        "healthy-h",
        "the checkpoint disk fills from step 20 to 3% free, layout H",
        changes={"seed": 311, "steps": 50},
        edits=(partial(messy.disk_fill, from_step=20, to_ratio=0.03),),
        every=5,
        expect=(Want("disk_low", disk_below, why="system/ckpt_disk_free_ratio under 10%"),),
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED),
    ),
    Spec(
        "33_truncation-l-borderline",
        "truncation-l",
        "truncation settles just above half (severity 0.45) from step 12, sampled from 16 rollouts a step, layout L",
        difficulty="hard",
        description="Hard: the per-step truncated fraction is k/16 from the rollouts files, so a level of ~55-60% "
        "dips under 50% on single steps; the signal is clear over a window, noisy step by step.",
        changes={"steps": 55, "onset_step": 12, "severity": 0.45, "rollout_steps_kept": 32, "seed": 331},
        every=5,
        expect=(TRUNC_WANT,),
        allow=AFTER_TRUNCATION,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED),
    ),
    Spec(
        "34_stall-h-slow-steps",
        "healthy-h",
        "the trainer hangs after step 16 of a run with 4-minute steps: the stall limit is 3 x step time, not 10 min",
        difficulty="medium",
        changes={"steps": 16, "step_time_s": 240.0, "seed": 341},
        edits=(partial(messy.hang, minutes=40),),
        every=4,
        tail=(-35 * 60.0, -29 * 60.0, -25 * 60.0, -15 * 60.0, 0.0),
        expect=(STALL_WANT,),
        bad=Health.DOWN,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED),
    ),
    Spec(
        "35_entropy-collapse-l-rotated-junk",
        "entropy-collapse-h",
        "entropy collapse from step 22, layout L, with the trainer log rotated mid-collapse and binary junk",
        difficulty="medium",
        changes={"layout": "L", "seed": 351, "onset_step": 22, "steps": 50},
        edits=(
            partial(messy.rotate, stream_name="trainer", step=28),
            partial(messy.binary_junk, stream_name="trainer", step=31),
        ),
        every=5,
        expect=(ENTROPY_WANT,),
        allow=AFTER_COLLAPSE,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED, "nan_detected"),
    ),
    Spec(
        "32_entropy-collapse-h-new-york-dirty",
        "entropy-collapse-h",
        "entropy collapse in New York local time across midnight, junk bytes and a torn metrics row",
        difficulty="medium",
        changes={"log_tz": "America/New_York", "start": datetime(2026, 8, 25, 3, 45, tzinfo=UTC), "seed": 321},
        edits=DIRTY_BYTES,
        expect=(ENTROPY_WANT,),
        allow=AFTER_COLLAPSE,
        forbid=(*NORMAL_LOOKING, *NOT_CRASHED, "nan_detected"),
    ),
    # --- every other simulator scenario, as it is (allow/forbid from the scenario) ----------------
    # healthy shapes
    scenario_row("36_fast-learner-h", "fast-learner-h", "healthy: reward climbs within ~10 steps and stays high, layout H"),
    scenario_row("37_slow-learner-l", "slow-learner-l", "healthy: reward climbs slowly all run long, layout L"),
    scenario_row("38_plateau-h", "plateau-h", "healthy: reward saturates early and holds (reward_flat is only a note), layout H"),
    scenario_row(
        "39_noisy-h", "noisy-h", "healthy: noisy reward, entropy and grad norm around sound trends", difficulty="medium"
    ),
    scenario_row(
        "40_alarming-normal-h",
        "alarming-normal-h",
        "healthy, with every normal thing that looks alarming, stronger than usual, layout H",
        difficulty="medium",
        changes={"seed": 409, **BIG_BATCH},
        description="Long start-up with `not reached` warnings, loss 0 at the first steps, a 4x one-step grad-norm "
        "excursion, ~3% errored and truncated rollouts: all normal (findings.md). Seed 409: the profile's failed "
        "share (3.2% x lognormal) passes 5% over some 10-step window for 9 of 10 seeds (5.9% for the registry's "
        "seed 19 at its 128 rollouts a step), and then env_errors is a correct report; this seed stays under it.",
    ),
    scenario_row(
        "41_alarming-normal-l",
        "alarming-normal-l",
        "healthy, with every normal thing that looks alarming, layout L",
        difficulty="medium",
        changes={"seed": 428, "batch_size": 64, "rollout_steps_kept": 0},
        description="Seed 428: one that keeps the ~3% failed rollouts under 5% over every 10-step window "
        "(most seeds of the profile cross it; see 40_alarming-normal-h).",
    ),
    scenario_row("42_healthy-multienv-l", "healthy-multienv-l", "healthy run with two train envs, layout L"),
    scenario_row(
        "43_finished-l", "finished-l", "run that finishes cleanly, layout L (scenario finished-l)", FINISHED_WANT, tail=(0.0,)
    ),
    # stability
    scenario_row(
        "44_entropy-explosion-h", "entropy-explosion-h", "entropy climbs without bound from step 25, layout H", EXPLOSION_WANT
    ),
    scenario_row(
        "45_entropy-explosion-l",
        "entropy-explosion-h",
        "entropy climbs without bound from step 25, layout L",
        EXPLOSION_WANT,
        changes={"layout": "L", "seed": 451},
    ),
    scenario_row("46_grad-spike-h", "grad-spike-h", "grad norm 15-25x its median for 4 steps from step 28, layout H", GRAD_WANT),
    scenario_row(
        "47_grad-spike-l",
        "grad-spike-h",
        "grad norm 15-25x its median for 4 steps from step 28, layout L",
        GRAD_WANT,
        changes={"layout": "L", "seed": 471},
    ),
    scenario_row("48_mismatch-kl-h", "mismatch-kl-h", "mismatch KL grows exponentially from step 30, layout H", MISMATCH_WANT),
    scenario_row(
        "49_mismatch-kl-l",
        "mismatch-kl-h",
        "mismatch KL grows exponentially from step 30, layout L",
        MISMATCH_WANT,
        changes={"layout": "L", "seed": 491},
    ),
    scenario_row("50_kl-blowup-h", "kl-blowup-h", "reference KL blows up from step 30, layout H", KL_WANT),
    # health
    scenario_row(
        "51_crash-nccl-h",
        "crash-nccl-h",
        "NCCL watchdog timeout kills the 2-GPU trainer at step 18 after a 10 min hang, layout H",
        *NCCL_WANTS,
        tail=(0.0, 600.0),
    ),
    scenario_row(
        "52_crash-nccl-l",
        "crash-nccl-h",
        "NCCL watchdog timeout kills the 2-GPU trainer at step 18, layout L",
        *NCCL_WANTS,
        changes={"layout": "L", "seed": 521},
        tail=(0.0, 600.0),
    ),
    scenario_row(
        "53_crash-python-h",
        "crash-python-h",
        "the orchestrator dies of a KeyError in scoring at step 21, layout H",
        PYTHON_CRASH_WANT,
        tail=(0.0, 600.0),
    ),
    scenario_row(
        "54_crash-python-l",
        "crash-python-l",
        "the orchestrator dies of a KeyError in scoring at step 17, layout L",
        PYTHON_CRASH_WANT,
        tail=(0.0, 600.0),
    ),
    scenario_row(
        "55_host-oom-h",
        "host-oom-h",
        "SLURM job: the kernel OOM-kills the trainer at step 26 (exit code -9 in job_<id>.log only), layout H",
        *HOST_OOM_WANTS,
        difficulty="medium",
        tail=(0.0, 600.0),
        description="The trainer is SIGKILLed: no traceback anywhere under logs/; only the launcher's output in the "
        "SLURM job log says `exit code -9`, followed by slurmstepd's oom_kill line.",
    ),
    scenario_row(
        "56_inference-unreachable-h",
        "inference-unreachable-h",
        "vLLM dies during step 19: 30 min of `not reached` warnings, then `Aborting`, layout H",
        *UNREACHABLE_WANTS,
        difficulty="medium",
        tail=(-1500.0, 0.0, 600.0),
        description="A check-in 5 min into the outage (warnings after the first step: Degraded, not start-up noise, "
        "not yet a stall), then the abort (Down).",
    ),
    scenario_row(
        "57_inference-unreachable-l",
        "inference-unreachable-h",
        "vLLM dies during step 19: `not reached` warnings, then `Aborting`, layout L",
        *UNREACHABLE_WANTS,
        difficulty="medium",
        changes={"layout": "L", "seed": 571},
        tail=(-1500.0, 0.0, 600.0),
    ),
    scenario_row(
        "58_stall-h",
        "stall-h",
        "the trainer hangs in step 24 while the orchestrator keeps logging its pipeline, layout H",
        STALL_WANT,
        difficulty="medium",
        tail=(-1200.0, -600.0, 0.0),
    ),
    scenario_row(
        "59_stall-l",
        "stall-h",
        "the trainer hangs in step 24, layout L",
        STALL_WANT,
        difficulty="medium",
        changes={"layout": "L", "seed": 591},
        tail=(-1200.0, -600.0, 0.0),
    ),
    scenario_row(
        "60_checkpoint-failure-h",
        "checkpoint-failure-h",
        "trainer checkpoint saves leave no .metadata from step 30 (prime-rl logs no save error), layout H",
        CKPT_ERROR_WANT,
    ),
    scenario_row(
        "61_checkpoint-failure-l",
        "checkpoint-failure-h",
        "trainer checkpoint saves leave no .metadata from step 30, layout L",
        CKPT_ERROR_WANT,
        changes={"layout": "L", "seed": 611},
    ),
    scenario_row(
        "62_disk-low-h", "disk-low-h", "the checkpoint disk fills below 10% free from step 28, layout H", DISK_WANT, every=5
    ),
    scenario_row(
        "63_env-errors-l",
        "env-errors-l",
        "sandboxes die: rollout errors and dropped groups grow past 5% of the rollouts from step 25, layout L",
        ENV_WANT,
        difficulty="medium",
        changes={"batch_size": 64, "rollout_steps_kept": 0},
    ),
    scenario_row(
        "64_env-errors-h",
        "env-errors-l",
        "sandboxes die: failed env requests (tracebacks) grow past 5% of the rollouts from step 25, layout H",
        ENV_WANT,
        difficulty="medium",
        changes={"layout": "H", "seed": 641, **BIG_BATCH},
    ),
    # progress
    scenario_row("65_truncation-h", "truncation-h", "truncation climbs past 60% from step 25, layout H", TRUNC_WANT),
    scenario_row(
        "66_zero-advantage-h", "zero-advantage-h", "task too easy: Trainable under 25% from step 28, layout H", ZERO_WANT
    ),
    scenario_row(
        "67_reward-constant-h",
        "reward-constant-h",
        "reward function broken: every rollout scores 0 from step 25, layout H",
        CONSTANT_WANT,
        ZERO_WANT,
    ),
    scenario_row(
        "68_reward-constant-l",
        "reward-constant-h",
        "reward function broken: every rollout scores 0 from step 25, layout L",
        CONSTANT_WANT,
        ZERO_WANT,
        difficulty="medium",
        changes={"layout": "L", "seed": 681},
        description="L logs no Trainable: zero advantage shows as a reward of exactly 0.0000 on every step "
        "(every group all-equal) and in the saved rollouts.",
    ),
    scenario_row(
        "69_errored-rollouts-h",
        "errored-rollouts-h",
        "rollouts time out: Error above 5% of every batch from step 30, layout H",
        ERRORED_WANT,
        changes=BIG_BATCH,
    ),
    scenario_row(
        "70_length-collapse-h",
        "length-collapse-h",
        "completions shrink to a quarter of their length at step 28, layout H",
        LENGTH_COLLAPSE_WANT,
    ),
    scenario_row(
        "71_length-explosion-h",
        "length-explosion-h",
        "completions grow to the length cap from step 30, layout H",
        LENGTH_EXPLOSION_WANT,
    ),
    scenario_row(
        "72_reward-regression-h",
        "reward-regression-h",
        "reward peaks, then falls back by half from step 30, layout H",
        REGRESSION_WANT,
        difficulty="medium",
    ),
    scenario_row(
        "73_reward-regression-l",
        "reward-regression-h",
        "reward peaks, then falls back by half from step 30, layout L",
        REGRESSION_WANT,
        difficulty="medium",
        changes={"layout": "L", "seed": 731},
    ),
    scenario_row(
        "74_reward-flat-h",
        "reward-flat-h",
        "reward stops improving at step 12 and stays flat (info), layout H",
        FLAT_WANT,
        changes={"steps": 75},
    ),
    scenario_row(
        "75_reward-flat-l",
        "reward-flat-h",
        "reward stops improving at step 12 and stays flat (info), layout L",
        FLAT_WANT,
        changes={"layout": "L", "seed": 751},
    ),
    scenario_row(
        "76_eval-regression-h",
        "eval-regression-h",
        "eval avg@k falls three evals in a row from step 25 while the train reward rises, layout H",
        EVAL_WANT,
        difficulty="medium",
    ),
    scenario_row(
        "77_eval-regression-l",
        "eval-regression-h",
        "eval avg@k falls three evals in a row while the train reward rises, layout L",
        EVAL_WANT,
        difficulty="medium",
        changes={"layout": "L", "seed": 771},
    ),
    scenario_row(
        "78_empty-batches-h",
        "empty-batches-h",
        "empty train batches before more and more steps from step 30, layout H",
        EMPTY_WANT,
    ),
    # performance
    scenario_row(
        "79_orchestrator-bottleneck-h",
        "orchestrator-bottleneck-h",
        "rollouts slow down 3x from step 30: the trainer waits for batches, layout H",
        ORCH_WANT,
    ),
    scenario_row(
        "80_trainer-bottleneck-h",
        "trainer-bottleneck-h",
        "the trainer slows down 3x from step 30: the orchestrator waits for policies, layout H",
        TRAINER_WANT,
    ),
    scenario_row(
        "81_step-time-regression-l",
        "step-time-regression-l",
        "the whole node slows down 2x from step 30, layout L",
        STEP_TIME_WANT,
    ),
    scenario_row(
        "82_step-time-regression-h",
        "step-time-regression-l",
        "the whole node slows down 2x from step 30, layout H",
        STEP_TIME_WANT,
        changes={"layout": "H", "seed": 821},
    ),
    scenario_row(
        "83_off-policy-drops-h",
        "off-policy-drops-h",
        "more and more episodes cancelled past max_off_policy_steps from step 28, layout H",
        OFF_POLICY_WANT,
        difficulty="medium",
    ),
    # L's own texts for the same two failures (numbered after the framework fixtures 84-127)
    scenario_row(
        "128_empty-batches-l",
        "empty-batches-h",
        "batches filtered out entirely (`Attempt i/3 ... filtered out all n rollouts`) from step 30, layout L",
        Want("empty_batches", after_onset(0, "orchestrator"), why="`Attempt i/3 at step s filtered out all n rollouts`"),
        changes={"layout": "L", "seed": 1281},
    ),
    scenario_row(
        "129_off-policy-drops-l",
        "off-policy-drops-h",
        "more and more `Cancelled N old rollout requests` from step 28, layout L",
        Want("off_policy_drops", drops_growing, why="`Cancelled N old rollout requests`, growing"),
        difficulty="medium",
        changes={"layout": "L", "seed": 1291},
    ),
)
