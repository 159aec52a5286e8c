"""Make the recorded-run fixtures under evals/fixtures/ from the simulator, table-driven.

    python -m rlagent.evals.make_fixtures                 # re-make all
    python -m rlagent.evals.make_fixtures 16_nan-h nan-l  # just these (name or slug)
    python -m rlagent.evals.make_fixtures --list

Each row of `TABLE` is one fixture: a simulator scenario and its variant (shrunk so a fixture
stays about 1 MB), the messy edits that make it look recorded (messy.py), the check-in schedule,
and the findings it must produce. What a finding expects is not read off the rules: the step
where the signal becomes unambiguous is computed from the simulator's own numbers with
findings.md's thresholds (`Thresholds()` defaults), so a rule that lags or misses shows up as a
miss in the scoreboard instead of being baked into the fixture. Health per check-in follows:
Healthy before the signal, either answer while it is still ambiguous, the failure's health once
it is not (and Healthy again after a resume the run came back from).

To add a fixture, add a row: a scenario of `SCENARIOS` as the base, `changes` for its variant,
`edits` from messy.py, and a `Want` per expected id whose `settle` says when its signal is
unambiguous (`sustained(...)` for a threshold held k steps, `after_onset(lead)` for a fixed lead,
or a function of the recording). Output is deterministic: re-making gives the same bytes, and
manifest.json carries the mtimes git drops. Re-make after a simulator change (a test compares).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from zoneinfo import ZoneInfo

from rlagent.agents.rules.thresholds import Thresholds
from rlagent.evals import messy
from rlagent.evals.case import Case, CheckinAt, Expect, HealthPhase
from rlagent.evals.casewriter import render_case
from rlagent.evals.cut import RecordedRun
from rlagent.evals.fixture import CASE, FIXTURES, RUN
from rlagent.evals.manifest import MANIFEST, build_manifest
from rlagent.evals.messy import Recording
from rlagent.evals.replay import schedule
from rlagent.evals.simulator import SCENARIOS, Scenario, write_run
from rlagent.evals.simulator.dynamics import Dynamics
from rlagent.graph.state import Health

T = Thresholds()
SMALL: dict[str, dict[str, object]] = {
    # Fewer rollouts per step and evals, rollouts saved for the last step only: about 1 MB a run.
    "H": {"batch_size": 16, "group_size": 8, "eval_examples": 8, "eval_k": 2, "rollout_steps_kept": 1},
    "L": {"batch_size": 16, "group_size": 8, "eval_examples": 8, "eval_k": 2, "rollout_steps_kept": 3},
}
NORMAL_LOOKING = ("inference_unreachable", "nccl_error", "grad_norm_spike")
"""What the alarming-but-normal lines of every run would wrongly raise (findings.md)."""
NOT_CRASHED = ("run_crashed", "cuda_oom", "host_oom", "process_down")
QUIET = (*NORMAL_LOOKING, *NOT_CRASHED, "run_stalled", "env_errors", "errored_rollouts_high", "checkpoint_failure")
"""Forbidden on a healthy run."""

Moment = tuple[int, float]
"""(signal step, epoch seconds when the signal is unambiguous)."""
Settle = Callable[[Recording, RecordedRun], Moment]


@dataclass(frozen=True)
class Want:
    """An expected finding and how to tell when its signal is unambiguous."""

    id: str
    settle: Settle
    severity: str | None = None
    why: str = ""


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


# --- when a signal is unambiguous (findings.md thresholds on the simulator's numbers) ----------


def _dyn(rec: Recording) -> Dynamics:
    return rec.sim.dyn


def _at_step(run: RecordedRun, step: int, process: str | None) -> float:
    seen = run.step_time(step, process)
    if seen is None:
        raise ValueError(f"no {process or 'process'} logs step {step}: the schedule cannot place the signal")
    return seen


def sustained(
    value: Callable[[Dynamics, int, dict], float],
    holds: Callable[[float, dict], bool],
    process: str,
    signal: int | None = None,
) -> Settle:
    """The step where `holds` has been true `sustain_steps` steps in a row, from the scenario's
    numbers; `value` and `holds` get a scratch dict for baselines. The signal starts at
    `signal` (default: the scenario's onset)."""

    def settle(rec: Recording, run: RecordedRun) -> Moment:
        dyn, sc = _dyn(rec), rec.scenario
        scratch: dict = {}
        streak = 0
        for n in range(1, sc.steps + 1):
            v = value(dyn, n, scratch)
            streak = streak + 1 if math.isfinite(v) and holds(v, scratch) else 0
            if streak >= T.sustain_steps:
                return signal or sc.onset_step, _at_step(run, n, process)
        raise ValueError(f"{sc.name}: the signal never holds {T.sustain_steps} steps")

    return settle


def _entropy(dyn: Dynamics, n: int, scratch: dict) -> float:
    v = dyn.at(n).entropy
    early = scratch.setdefault("early", [])
    if len(early) < T.early_steps and math.isfinite(v):
        early.append(v)
    return v


def _collapsed(v: float, scratch: dict) -> bool:
    early = statistics.median(scratch["early"])
    return v < T.entropy_collapse_ratio * early or (v < T.entropy_collapse_abs and early >= 2 * T.entropy_collapse_abs)


ENTROPY = sustained(_entropy, _collapsed, "trainer")
TRUNCATION = sustained(lambda d, n, s: d.at(n).truncation, lambda v, s: v > T.truncation_high, "orchestrator")
ERRORED = sustained(lambda d, n, s: d.at(n).error, lambda v, s: v > T.errored_high, "orchestrator", signal=1)


def after_onset(lead: int, process: str | None = None) -> Settle:
    """For a failure whose threshold needs `lead` steps past the onset (sustain windows,
    smoothing): unambiguous once `process` (any, if None) logs step onset + lead. The simple way
    to add a row for a new simulator kind (its `lead` in the simulator's expectations table)."""

    def settle(rec: Recording, run: RecordedRun) -> Moment:
        onset = rec.scenario.onset_step
        return onset, _at_step(run, onset + lead, process)

    return settle


def env_error_share(rec: Recording, run: RecordedRun) -> Moment:
    """Failed episodes over the last `event_window_steps` steps above `errored_high` of the
    rollouts, once the window holds at least `sustain_steps` steps."""
    dyn, sc = _dyn(rec), rec.scenario
    for n in range(T.sustain_steps, sc.steps + 1):
        steps = range(max(1, n - T.event_window_steps + 1), n + 1)
        failed = sum(dyn.at(k).failed for k in steps)
        if failed / (len(steps) * sc.batch_size) > T.errored_high:
            return 1, _at_step(run, n, "orchestrator")
    raise ValueError(f"{sc.name}: env errors never exceed {T.errored_high:.0%}")


def nan_step(rec: Recording, run: RecordedRun) -> Moment:
    """Any non-finite value: the trainer's step line at the onset prints `nan`."""
    onset = rec.scenario.onset_step
    return onset, _at_step(run, onset, "trainer")


def crash_line(rec: Recording, run: RecordedRun) -> Moment:
    """The `Fatal error in train` line (and its CUDA OOM) at the onset step."""
    return rec.scenario.onset_step, rec.epoch(rec.sim.tl.crash_time())


def finished_line(rec: Recording, run: RecordedRun) -> Moment:
    return rec.scenario.max_steps, run.end


def stalled(rec: Recording, run: RecordedRun) -> Moment:
    """No new step for max(stall_min_minutes, 3 x median step time) after the newest step line."""
    tl = rec.sim.tl
    times = [tl.trainer_step_time(n) for n in range(max(1, rec.scenario.steps - T.rolling_window + 1), rec.scenario.steps + 1)]
    limit = max(T.stall_min_minutes * 60, T.stall_step_multiple * statistics.median(times))
    newest = max(s.time for s in run.steps)
    return rec.scenario.steps + 1, newest + limit


def checkpoint_lag(from_step: int) -> Settle:
    """An incomplete step_N counts once the trainer is `ckpt_lag_steps` past N."""

    def settle(rec: Recording, run: RecordedRun) -> Moment:
        return from_step, _at_step(run, from_step + T.ckpt_lag_steps, "trainer")

    return settle


def checkpoint_error(from_step: int) -> Settle:
    """A checkpoint error line is explicit: the moment it is written."""

    def settle(rec: Recording, run: RecordedRun) -> Moment:
        return from_step, rec.trainer_end(from_step - 1) + 1.0

    return settle


def disk_below(rec: Recording, run: RecordedRun) -> Moment:
    """The first metrics row with `system/ckpt_disk_free_ratio` under `disk_free_low`."""
    for raw in (rec.root / "metrics.jsonl").read_bytes().splitlines():
        row = json.loads(raw)
        if row.get("system/ckpt_disk_free_ratio", 1.0) < T.disk_free_low:
            return row["step"], row["time"]
    raise ValueError("the disk never gets low")


# --- the table -----------------------------------------------------------------------------------

WARNINGS_H = partial(
    messy.warnings,
    stream_name="orchestrator",
    lines=[
        (12, 3.0, "WARNING", "Cancelled 4 train episodes past max_off_policy_steps=8. Consider raising it."),
        (17, 2.0, "WARNING", "Only 9/16 effective traces are trainable (56.2%) — consider reviewing task difficulty"),
        (26, 5.0, "WARNING", "Dropped 2 queued traces past max_off_policy_steps=8."),
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
    lines=[(21, 1.5, "WARNING", "Failed to remove /workspace/prime-rl/outputs/ckpt-tmp/step_10: [Errno 39] Directory not empty")],
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
    Want("env_errors", env_error_share, why="`Trace failed in group` / `Rollout failed` for over 5% of rollouts"),
)
STALL_WANT = Want("run_stalled", stalled, "critical", why="no step for longer than max(10 min, 3 x step time)")

# Consequences a failure really causes in the data (not false alarms): a collapse makes groups
# identical (zero advantage), a NaN breaks the policy (rewards 0, outputs run to the cap).
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
        "12% of rollouts fail from the start, layout L (only `Rollout failed` lines show it)",
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
        "30_checkpoint-error-l",
        "healthy-l",
        "orchestrator checkpoint saves fail with an ERROR line from step 30, layout L",
        changes={"seed": 301, "steps": 50},
        edits=(partial(messy.drop_checkpoint_part, from_step=30, error_line=True),),
        every=5,
        expect=(Want("checkpoint_failure", checkpoint_error(30), why="`Failed to save checkpoint` and no progress.pt"),),
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
)


# --- making one fixture ---------------------------------------------------------------------------


def scenario_of(spec: Spec) -> Scenario:
    base = SCENARIOS[spec.scenario]
    layout = str(spec.changes.get("layout", base.layout))
    return base.variant(**{**SMALL[layout], **spec.changes})


def _schedule(spec: Spec, rec: Recording, run: RecordedRun) -> list[CheckinAt]:
    """Every `spec.every` trainer steps, at the marks, then the tail (or the end), in time order."""
    last = run.last_step("trainer") or 0
    timed: list[tuple[float, CheckinAt]] = []
    for n in range(spec.every, last + 1, spec.every):
        seen = run.step_time(n, "trainer")
        assert seen is not None
        timed.append((seen + 1.0, CheckinAt(step=n)))
    for mark, after in spec.at_marks:
        moment = round(rec.marks[mark] + after)
        timed.append((moment, CheckinAt(at=datetime.fromtimestamp(moment, UTC))))
    tail = spec.tail or ((0.0,) if last % spec.every else ())
    timed += [(run.end + s, CheckinAt(end=True, offset_s=s)) for s in tail]
    return [c for _, c in sorted(timed, key=lambda item: item[0])]


def _first_at(moments: list[datetime], epoch: float) -> int | None:
    return next((i for i, m in enumerate(moments, start=1) if m.timestamp() >= epoch), None)


def _health(spec: Spec, expects: list[tuple[Want, Expect, int]], moments: list[datetime], rec: Recording) -> list[HealthPhase]:
    """Healthy, then either while the signal is ambiguous, then `spec.bad` (then Healthy after a recovery)."""
    n = len(moments)
    graded = [(e, onset) for w, e, onset in expects if (w.severity or "warning") != "info"]
    if not graded:
        return [HealthPhase(health=Health.HEALTHY)]
    onset = min(o for _, o in graded)
    due = min(e.by_checkin for e, _ in graded)
    phases: list[tuple[int, Health | list[Health]]] = []
    if onset > 1:
        phases.append((onset - 1, Health.HEALTHY))
    if due > onset:
        phases.append((due - 1, [Health.HEALTHY, spec.bad]))
    end_bad = n
    if spec.recovers:
        back = _first_at(moments, rec.marks[spec.recovers])
        if back is None:
            raise ValueError(f"{spec.slug}: no check-in after {spec.recovers}")
        end_bad = back - 1
    phases.append((end_bad, spec.bad))
    if end_bad < n:
        phases.append((n, Health.HEALTHY))
    return [HealthPhase(health=h, until_checkin=None if i == len(phases) - 1 else until) for i, (until, h) in enumerate(phases)]


def build(spec: Spec, work: Path) -> tuple[Case, Path, str]:
    """Write the run of `spec` into `work/run`, apply its edits; return (case, run dir, manifest text)."""
    sc = scenario_of(spec)
    run_dir = write_run(sc, work / RUN)
    rec = Recording(run_dir, sc)
    for edit in spec.edits:
        edit(rec)
    manifest = build_manifest(run_dir, symlinks=rec.links, renames=rec.renames)
    recorded = RecordedRun(run_dir, manifest, ZoneInfo(sc.log_tz))
    checkins = _schedule(spec, rec, recorded)
    draft = Case(
        title=spec.title,
        layout=sc.layout,
        difficulty=spec.difficulty,  # type: ignore[arg-type]
        log_timezone=sc.log_tz,
        checkins=checkins,
        health=[HealthPhase(health=Health.HEALTHY)],
    )
    moments = schedule(draft, recorded, spec.slug)
    expects: list[tuple[Want, Expect, int]] = []
    for want in spec.expect:
        signal_step, unambiguous = want.settle(rec, recorded)
        due = _first_at(moments, unambiguous)
        if due is None:
            raise ValueError(f"{spec.slug}: {want.id} is unambiguous only after the last check-in")
        signal_seen = recorded.step_time(signal_step, None)
        onset = _first_at(moments, signal_seen if signal_seen is not None else unambiguous) or due
        expect = Expect(id=want.id, signal_step=signal_step, by_checkin=due, severity=want.severity, why=want.why)  # type: ignore[arg-type]
        expects.append((want, expect, min(onset, due)))
    description = spec.description
    if rec.edits:
        description += ("\n" if description else "") + "Edits: " + "; ".join(rec.edits) + "."
    case = draft.model_copy(
        update={
            "description": description,
            "expect": [e for _, e, _ in expects],
            "allow": list(spec.allow),
            "forbid": [f for f in spec.forbid if f not in {w.id for w in spec.expect}],
            "health": _health(spec, expects, moments, rec),
        }
    )
    return Case.model_validate(case.model_dump()), run_dir, manifest.dumps()


def make(spec: Spec, root: Path = FIXTURES) -> Path:
    with tempfile.TemporaryDirectory(prefix="rlagent-fixture-") as tmp:
        case, run_dir, manifest = build(spec, Path(tmp))
        target = root / spec.slug
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        shutil.copytree(run_dir, target / RUN, symlinks=True)
    (target / MANIFEST).write_text(manifest, encoding="utf-8")
    header = (
        f"Fixture {spec.slug}: made by evals/make_fixtures.py from scenario {spec.scenario!r}.\n"
        "Change the TABLE row there and re-make; by_checkin is computed from findings.md thresholds."
    )
    (target / CASE).write_text(render_case(case, header), encoding="utf-8")
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Make the recorded-run fixtures under evals/fixtures/.")
    parser.add_argument("slugs", nargs="*", help="fixtures to make (default: all)")
    parser.add_argument("--out", type=Path, default=FIXTURES, help="where to write them")
    parser.add_argument("--list", action="store_true", help="list the table and exit")
    args = parser.parse_args(argv)
    chosen = [s for s in TABLE if not args.slugs or s.slug in args.slugs or s.slug.split("_", 1)[1] in args.slugs]
    if args.list:
        for spec in TABLE:
            print(f"{spec.slug:40} {spec.difficulty:7} {', '.join(w.id for w in spec.expect) or '-'}")
        return 0
    unknown = set(args.slugs) - {s.slug for s in chosen} - {s.slug.split("_", 1)[1] for s in chosen}
    if unknown:
        print(f"unknown fixture(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    for spec in chosen:
        target = make(spec, args.out)
        size = sum(p.stat().st_size for p in (target / RUN).rglob("*") if p.is_file() and not p.is_symlink())
        print(f"{target.name:40} {size / 1e6:5.2f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
