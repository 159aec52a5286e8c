"""When a fixture's expected finding becomes unambiguous: findings.md's thresholds (the defaults of
`Thresholds()`) applied to the simulator's own numbers, never read off the rules, so a rule that
lags or misses shows up as a miss in the scoreboard instead of being baked into the fixture.

A `Want` is one expected finding of a row of the case table (evals/fixture_table.py) and its
`settle`: `sustained(...)` for a threshold held k steps, `after_onset(lead)` for a fixed lead, or a
function of the recording giving (signal step, epoch seconds when it is unambiguous).
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from rlagent.agents.rules.thresholds import Thresholds
from rlagent.evals.cut import RecordedRun
from rlagent.evals.messy import Recording
from rlagent.evals.simulator.crashes import plan as crash_plan
from rlagent.evals.simulator.dynamics import Dynamics
from rlagent.evals.simulator.timeline import Timeline
from rlagent.models.run import Health

T = Thresholds()

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


def checkpoint_incomplete(rec: Recording, run: RecordedRun) -> Moment:
    """The first checkpoint step from the onset lacks `trainer/.metadata`; prime-rl logs no save
    error, so it counts once the trainer is `ckpt_lag_steps` past it."""
    n = rec.scenario.signal_step
    assert n is not None
    return n, _at_step(run, n + T.ckpt_lag_steps, "trainer")
