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
or a function of the recording). A `scenario_row` shows a simulator scenario as it is: its allow
and forbid lists are the scenario's own `tolerates` / `forbids`, its expected ids must be exactly
the scenario's `expects`, and health follows each finding (Down for a crash or stall, Degraded
for a warning, so a run can be Degraded first and Down later). Every scenario has one, in each
layout whose files show its failure (a test checks). Output is deterministic: re-making gives
the same bytes, and manifest.json carries the mtimes git drops. Re-make after a simulator change
(a test compares).
"""

from __future__ import annotations

import argparse
import itertools
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
from rlagent.evals.manifest import MANIFEST, build_manifest, utc
from rlagent.evals.messy import Recording
from rlagent.evals.replay import schedule
from rlagent.evals.simulator import SCENARIOS, Scenario, write_run
from rlagent.evals.simulator.crashes import plan as crash_plan
from rlagent.evals.simulator.dynamics import Dynamics
from rlagent.evals.simulator.expectations import DOWN_IDS, INFO_IDS
from rlagent.evals.simulator.timeline import Timeline
from rlagent.models.run import Health

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
    health: Health | None = None
    """The health once it is unambiguous (default: the row's `bad`; in a `contract` row, Down
    for ids that stop training and Degraded for the other warnings)."""


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
    steps: int | None = None,
) -> Settle:
    """The step where `holds` has been true `steps` (default `sustain_steps`) steps in a row,
    from the scenario's numbers; `value` and `holds` get a scratch dict for baselines (a
    non-finite value breaks the streak). The signal starts at `signal` (default: the
    scenario's onset)."""
    k = steps or T.sustain_steps

    def settle(rec: Recording, run: RecordedRun) -> Moment:
        dyn, sc = _dyn(rec), rec.scenario
        scratch: dict = {"tl": rec.sim.tl, "sc": sc}
        streak = 0
        for n in range(1, sc.steps + 1):
            v = value(dyn, n, scratch)
            streak = streak + 1 if math.isfinite(v) and holds(v, scratch) else 0
            if streak >= k:
                return signal or sc.onset_step, _at_step(run, n, process)
        raise ValueError(f"{sc.name}: the signal never holds {k} steps")

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


def env_errors_from(signal: int | None) -> Settle:
    """Failed episodes over the last `event_window_steps` steps above `errored_high` of the
    rollouts, once the window holds at least `sustain_steps` steps. The signal starts at
    `signal` (None: the scenario's onset)."""

    def settle(rec: Recording, run: RecordedRun) -> Moment:
        dyn, sc = _dyn(rec), rec.scenario
        for n in range(T.sustain_steps, sc.steps + 1):
            steps = range(max(1, n - T.event_window_steps + 1), n + 1)
            failed = sum(dyn.at(k).failed for k in steps)
            if failed / (len(steps) * sc.batch_size) > T.errored_high:
                return signal or sc.onset_step, _at_step(run, n, "orchestrator")
        raise ValueError(f"{sc.name}: env errors never exceed {T.errored_high:.0%}")

    return settle


env_error_share = env_errors_from(1)
"""Env errors of a run that fails a share of its episodes from the start (trace_fail_rate)."""


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
    """No new step for max(stall_min_minutes, 3 x median step time) after the newest step line
    (the trainer's last step: the recording's, or the one before a simulated hang)."""
    tl, last = rec.sim.tl, rec.scenario.last_trainer_step
    times = [tl.trainer_step_time(n) for n in range(max(1, last - T.rolling_window + 1), last + 1)]
    limit = max(T.stall_min_minutes * 60, T.stall_step_multiple * statistics.median(times))
    newest = max(s.time for s in run.steps)
    return last + 1, newest + limit


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


# --- the simulator's other failure kinds (scenario numbers, findings.md thresholds) -------------


def _early_median(scratch: dict) -> float:
    return statistics.median(scratch["early"])


def _exploding(v: float, scratch: dict) -> bool:
    """Above entropy_explosion_ratio x the early median and still rising (higher than
    `sustain_steps` steps ago)."""
    history = scratch.setdefault("seen", [])
    history.append(v)
    before = history[-T.sustain_steps - 1] if len(history) > T.sustain_steps else math.inf
    return v > T.entropy_explosion_ratio * _early_median(scratch) and v > before


ENTROPY_UP = sustained(_entropy, _exploding, "trainer")


def _mismatch(dyn: Dynamics, n: int, scratch: dict) -> float:
    v = dyn.at(n).mismatch_kl
    early = scratch.setdefault("early", [])
    if len(early) < T.early_steps and math.isfinite(v):
        early.append(v)
    return v


MISMATCH_KL = sustained(_mismatch, lambda v, s: v > max(T.mismatch_kl_ratio * _early_median(s), T.mismatch_kl_floor), "trainer")


def _ref_kl(dyn: Dynamics, n: int, scratch: dict) -> float:
    v = dyn.at(n).ref_kl
    v = math.nan if v is None else v
    early = scratch.setdefault("early", [])
    if len(early) < T.early_steps and math.isfinite(v):
        early.append(v)
    return v


KL_BLOWUP = sustained(
    _ref_kl,
    lambda v, s: v > min(T.kl_blowup_abs, T.kl_blowup_ratio * max(_early_median(s), T.kl_early_floor)),
    "trainer",
    steps=T.kl_blowup_steps,
)


def grad_spike(rec: Recording, run: RecordedRun) -> Moment:
    """Grad norm above grad_spike_ratio x the median of the previous `rolling_window` steps on
    `grad_spike_steps` consecutive steps after warm-up."""
    dyn, sc = _dyn(rec), rec.scenario
    values: list[float] = []
    streak = 0
    for n in range(1, sc.steps + 1):
        v = dyn.at(n).grad_norm
        before = values[-T.rolling_window :]
        ref = statistics.median(before) if len(before) >= T.min_baseline_points else None
        spiking = n > T.warmup_steps and ref is not None and ref > 0 and v > T.grad_spike_ratio * ref
        streak = streak + 1 if spiking else 0
        if streak >= T.grad_spike_steps:
            return sc.onset_step, _at_step(run, n, "trainer")
        values.append(v)
    raise ValueError(f"{sc.name}: the grad norm never spikes {T.grad_spike_steps} steps in a row")


ZERO_ADVANTAGE = sustained(
    lambda d, n, s: d.at(n).trainable / d.at(n).effective, lambda v, s: v < T.zero_adv_trainable, "orchestrator"
)
REWARD_CONSTANT = sustained(
    lambda d, n, s: d.at(n).reward_max - d.at(n).reward_min,
    lambda v, s: v <= T.reward_constant_eps,
    "orchestrator",
    steps=T.reward_constant_steps,
)
ERRORED_FROM_ONSET = sustained(lambda d, n, s: d.at(n).error, lambda v, s: v > T.errored_high, "orchestrator")
LENGTH_EXPLOSION = sustained(
    lambda d, n, s: d.at(n).output_tokens,
    lambda v, s: v > T.length_explosion_ratio * s["sc"].max_completion_tokens,
    "orchestrator",
)


def _waited(process: str) -> Callable[[Dynamics, int, dict], float]:
    """Share of a step spent waiting for the other side, after warm-up (the first batch and the
    first policy are waited for by design): the trainer for batches, the orchestrator for
    policies."""

    def value(dyn: Dynamics, n: int, scratch: dict) -> float:
        tl: Timeline = scratch["tl"]
        if n <= T.warmup_steps:
            return math.nan
        if process == "trainer":
            step = tl.trainer_step_time(n)
            return tl.wait_for_batch[n] / step
        step = tl.orch_step_time(n)
        return tl.wait_for_policy[n] / step

    return value


ORCH_BOTTLENECK = sustained(_waited("trainer"), lambda v, s: v > T.wait_ratio_high, "trainer")
TRAINER_BOTTLENECK = sustained(_waited("orchestrator"), lambda v, s: v > T.wait_ratio_high, "orchestrator")


def _vs_before(values: dict[int, float], ratio: float, below: bool, k: int) -> int | None:
    """The first step ending `k` steps in a row below (or above) `ratio` x the median of the
    `rolling_window` values before the streak began (the level before a sudden change)."""
    steps = sorted(values)
    for i in range(len(steps)):
        for start in range(i - k + 1, -1, -1):
            before = [values[s] for s in steps[max(0, start - T.rolling_window) : start]]
            if len(before) < T.min_baseline_points:
                break
            limit = ratio * statistics.median(before)
            if all((values[s] < limit) if below else (values[s] > limit) for s in steps[start : i + 1]):
                return steps[i]
    return None


def length_collapse(rec: Recording, run: RecordedRun) -> Moment:
    """Mean completion length under length_collapse_ratio x its median before the drop for
    `length_collapse_steps` steps, after warm-up."""
    dyn, sc = _dyn(rec), rec.scenario
    lengths = {n: dyn.at(n).output_tokens for n in range(T.warmup_steps + 1, sc.steps + 1)}
    n = _vs_before(lengths, T.length_collapse_ratio, True, T.length_collapse_steps)
    if n is None:
        raise ValueError(f"{sc.name}: the length never collapses")
    return sc.onset_step, _at_step(run, n, "orchestrator")


def step_time_up(rec: Recording, run: RecordedRun) -> Moment:
    """Trainer or orchestrator step time above step_time_ratio x its median before the
    slowdown for `sustain_steps` steps, after warm-up: the first of the two."""
    tl, sc = rec.sim.tl, rec.scenario
    moments = []
    for process, seconds in (("trainer", tl.trainer_step_time), ("orchestrator", tl.orch_step_time)):
        times = {n: seconds(n) for n in range(T.warmup_steps + 1, sc.steps + 1)}
        n = _vs_before(times, T.step_time_ratio, False, T.sustain_steps)
        if n is not None:
            moments.append(_at_step(run, n, process))
    if not moments:
        raise ValueError(f"{sc.name}: step times never regress")
    return sc.onset_step, min(moments)


def _levels(rec: Recording) -> dict[int, float]:
    """Reward level at each step: the mean of the `reward_smooth_steps` steps ending there."""
    dyn, sc, w = _dyn(rec), rec.scenario, T.reward_smooth_steps
    rewards = [dyn.at(n).reward for n in range(1, sc.steps + 1)]
    return {n: statistics.fmean(rewards[n - w : n]) for n in range(w, sc.steps + 1)}


def reward_falls(rec: Recording, run: RecordedRun) -> Moment:
    """The reward level more than reward_regression_drop below its peak (before the streak) on
    `reward_regression_steps` consecutive levels."""
    sc, k = rec.scenario, T.reward_regression_steps
    levels = _levels(rec)
    steps = sorted(levels)
    for i in range(k, len(steps)):
        peak = max(levels[s] for s in steps[: i - k + 1])
        if all(levels[s] < (1 - T.reward_regression_drop) * peak for s in steps[i - k + 1 : i + 1]):
            return sc.onset_step, _at_step(run, steps[i], "orchestrator")
    raise ValueError(f"{sc.name}: the reward never falls {T.reward_regression_drop:.0%} below its peak")


def reward_flat_for(rec: Recording, run: RecordedRun) -> Moment:
    """The reward stops improving at the onset: unambiguous once the level of the
    `reward_smooth_steps` steps from there (after warm-up) is `reward_flat_steps` steps old."""
    sc = rec.scenario
    start = max(sc.onset_step, T.warmup_steps + 1)
    return sc.onset_step, _at_step(run, start + T.reward_smooth_steps - 1 + T.reward_flat_steps, "orchestrator")


def eval_falls(rec: Recording, run: RecordedRun) -> Moment:
    """An eval score lower at each of `eval_regression_evals` evals in a row, by at least
    eval_regression_min_drop of the first, while the train reward level rises over them: the
    moment the last of those evals is logged."""
    dyn, tl, sc, k = _dyn(rec), rec.sim.tl, rec.scenario, T.eval_regression_evals
    levels = _levels(rec)
    evals = [n for n in range(sc.eval_interval, sc.steps + 1, sc.eval_interval)]
    for env in sc.eval_env_names:
        for i in range(k - 1, len(evals)):
            last = evals[i - k + 1 : i + 1]
            scores = [dyn.eval_at(n, env).avg_at_k for n in last]
            falling = all(b < a for a, b in itertools.pairwise(scores))
            if not falling or scores[0] - scores[-1] < T.eval_regression_min_drop * abs(scores[0]):
                continue
            if last[0] in levels and levels[last[-1]] > levels[last[0]]:
                done = max(ev.end for ev in tl.evals(last[-1]) if ev.env == env)
                return sc.onset_step, rec.epoch(done)
    raise ValueError(f"{sc.name}: no eval falls {k} times in a row while the reward rises")


def drops_growing(rec: Recording, run: RecordedRun) -> Moment:
    """Episodes cancelled as too stale on at least `off_policy_min_steps` of the last
    `event_window_steps` steps, more of them than in the window before."""
    dyn, sc, w = _dyn(rec), rec.scenario, T.event_window_steps
    drops = {n: dyn.at(n).stale_cancelled for n in range(1, sc.steps + 1)}
    for n in range(1, sc.steps + 1):
        recent = [drops[k] for k in range(max(1, n - w + 1), n + 1)]
        before = [drops[k] for k in range(max(1, n - 2 * w + 1), max(1, n - w + 1))]
        if sum(1 for d in recent if d) >= T.off_policy_min_steps and sum(recent) > sum(before):
            return sc.onset_step, _at_step(run, n, "orchestrator")
    raise ValueError(f"{sc.name}: off-policy drops never grow")


def failure_logged(rec: Recording, run: RecordedRun) -> Moment:
    """The line that ends the run: the failing process's (`Fatal error in ...`, the NCCL
    watchdog), or, when the kernel SIGKILLs it and it prints nothing, the launcher's
    `... failed with exit code -9` (a SLURM job log)."""
    p = crash_plan(rec.sim)
    if p is None:
        raise ValueError(f"{rec.scenario.name}: the run does not crash")
    when = p.launcher_time if rec.scenario.kind == "host-oom" else p.time
    return rec.scenario.onset_step, rec.epoch(when)


def unreachable_after_start(rec: Recording, run: RecordedRun) -> Moment:
    """The first `Inference server was not reached after 10 seconds` warning once the engine
    died mid-run (the orchestrator warns every 10 s, 0.3 s into its poll)."""
    tl = rec.sim.tl
    return rec.scenario.onset_step, rec.epoch(tl.inference_down() + 10.3)


def checkpoint_error_line(rec: Recording, run: RecordedRun) -> Moment:
    """The trainer's `Failed to save checkpoint at step N` line, at the first checkpoint step
    from the onset (an explicit error: the moment it is written)."""
    n = rec.scenario.signal_step
    assert n is not None
    return n, rec.trainer_end(n) - 0.05


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
CKPT_ERROR_WANT = Want("checkpoint_failure", checkpoint_error_line, why="`Failed to save checkpoint`, no trainer/.metadata")
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
EMPTY_WANT = Want("empty_batches", after_onset(0, "orchestrator"), why="`empty train batch after ... (consecutive empty batches`")
ORCH_WANT = Want("orchestrator_bottleneck", ORCH_BOTTLENECK, why="the trainer waits for batches over half its step")
TRAINER_WANT = Want("trainer_bottleneck", TRAINER_BOTTLENECK, why="the orchestrator waits for policies over half its step")
STEP_TIME_WANT = Want("step_time_regression", step_time_up, why="step time above 1.5x its median before the slowdown")
OFF_POLICY_WANT = Want("off_policy_drops", drops_growing, why="`Cancelled N train episodes past max_off_policy_steps`, growing")

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
        "trainer checkpoint saves fail (no .metadata, an ERROR line) from step 30, layout H",
        CKPT_ERROR_WANT,
    ),
    scenario_row(
        "61_checkpoint-failure-l",
        "checkpoint-failure-h",
        "trainer checkpoint saves fail from step 30, layout L",
        CKPT_ERROR_WANT,
        changes={"layout": "L", "seed": 611},
    ),
    scenario_row(
        "62_disk-low-h", "disk-low-h", "the checkpoint disk fills below 10% free from step 28, layout H", DISK_WANT, every=5
    ),
    scenario_row(
        "63_env-errors-l",
        "env-errors-l",
        "env server tracebacks grow past 5% of the rollouts from step 25, layout L",
        ENV_WANT,
        difficulty="medium",
        changes={"batch_size": 64, "rollout_steps_kept": 0},
    ),
    scenario_row(
        "64_env-errors-h",
        "env-errors-l",
        "env server tracebacks grow past 5% of the rollouts from step 25, layout H",
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
)


# --- making one fixture ---------------------------------------------------------------------------


def scenario_of(spec: Spec) -> Scenario:
    base = SCENARIOS[spec.scenario]
    layout = str(spec.changes.get("layout", base.layout))
    return base.variant(**{**SMALL[layout], **spec.changes})


def _normal_rates(slug: str, rec: Recording) -> None:
    """A healthy row forbids env_errors, errored_rollouts_high and truncation_high: its realized
    numbers must stay on the normal side of those thresholds (a few % errored or truncated
    rollouts, findings.md), or the fixture would call a correct report a false alarm."""
    dyn, sc = _dyn(rec), rec.scenario
    err = trunc = 0
    for n in range(1, sc.steps + 1):
        st = dyn.at(n)
        window = range(max(1, n - T.event_window_steps + 1), n + 1)
        share = sum(dyn.at(k).failed for k in window) / (len(window) * sc.batch_size)
        if n >= T.sustain_steps and share > T.errored_high:
            raise ValueError(f"{slug}: {share:.1%} of the rollouts of steps {window[0]}-{n} failed (env_errors)")
        err = err + 1 if st.error > T.errored_high else 0
        trunc = trunc + 1 if st.truncation > T.truncation_high else 0
        if max(err, trunc) >= T.sustain_steps:
            raise ValueError(f"{slug}: errored or truncated rollouts above the limit for {T.sustain_steps} steps at {n}")


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
    """The first check-in at or after `epoch`, compared at the microseconds a check-in time
    keeps (a crash line that is the recording's last record is seen by its `end` check-in)."""
    when = utc(epoch)
    return next((i for i, m in enumerate(moments, start=1) if m >= when), None)


_RANK = {Health.HEALTHY: 0, Health.DEGRADED: 1, Health.DOWN: 2}


def _level(spec: Spec, want: Want) -> Health:
    """The health a finding means once it is unambiguous."""
    if (want.severity or "warning") == "info" or (spec.contract and want.id in INFO_IDS):
        return Health.HEALTHY
    if want.health is not None:
        return want.health
    if spec.contract:
        return Health.DOWN if want.id in DOWN_IDS else Health.DEGRADED
    return spec.bad


def _health(spec: Spec, expects: list[tuple[Want, Expect, int]], moments: list[datetime], rec: Recording) -> list[HealthPhase]:
    """Per check-in: the worst health of the findings already unambiguous (Healthy if none),
    or also a worse one while its signal shows but is still ambiguous; Healthy again after a
    recovery. Consecutive check-ins that accept the same healths form one phase."""
    n = len(moments)
    graded = [(_level(spec, w), onset, e.by_checkin) for w, e, onset in expects]
    graded = [g for g in graded if g[0] != Health.HEALTHY]
    if not graded:
        return [HealthPhase(health=Health.HEALTHY)]
    back = n + 1
    if spec.recovers:
        first = _first_at(moments, rec.marks[spec.recovers])
        if first is None:
            raise ValueError(f"{spec.slug}: no check-in after {spec.recovers}")
        back = first
    phases: list[tuple[int, tuple[Health, ...]]] = []
    for i in range(1, n + 1):
        if i >= back:
            accepted: tuple[Health, ...] = (Health.HEALTHY,)
        else:
            now = max((h for h, _, due in graded if due <= i), key=_RANK.__getitem__, default=Health.HEALTHY)
            pending = {h for h, onset, due in graded if onset <= i < due and _RANK[h] > _RANK[now]}
            accepted = tuple(sorted({now} | pending, key=_RANK.__getitem__))
        if phases and phases[-1][1] == accepted:
            phases[-1] = (i, accepted)
        else:
            phases.append((i, accepted))
    return [
        HealthPhase(health=h[0] if len(h) == 1 else list(h), until_checkin=None if i == len(phases) - 1 else until)
        for i, (until, h) in enumerate(phases)
    ]


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
    allow, forbid = spec.allow, spec.forbid
    if spec.contract:
        if sorted(w.id for w in spec.expect) != sorted(sc.expects):
            raise ValueError(f"{spec.slug}: the row expects {[w.id for w in spec.expect]}, the scenario {sc.expects}")
        if sc.kind == "healthy":
            _normal_rates(spec.slug, rec)
        allow, forbid = sc.tolerates, sc.forbids
    description = spec.description
    if rec.edits:
        description += ("\n" if description else "") + "Edits: " + "; ".join(rec.edits) + "."
    case = draft.model_copy(
        update={
            "description": description,
            "expect": [e for _, e, _ in expects],
            "allow": list(allow),
            "forbid": [f for f in forbid if f not in {w.id for w in spec.expect}],
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
