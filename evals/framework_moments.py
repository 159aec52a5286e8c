"""What the SIMULATED framework fixtures expect, from the simulator's own numbers: the rows a framework
logs (`Row`, each averaging its logging window) and the detectors that find, with findings.md's
thresholds (`Thresholds()` defaults), each finding's signal step and the moment it is unambiguous
(`moments`). Never read off the rules: make_framework_fixtures.py writes them into each case."""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from rlagent.agents.rules.thresholds import Thresholds
from rlagent.evals.simulator.frameworks.common import Growth, Plan
from rlagent.evals.simulator.frameworks.numbers import FrameworkNumbers, StepNumbers
from rlagent.evals.simulator.frameworks.samples import samples
from rlagent.evals.simulator.frameworks.scenario import FrameworkScenario
from rlagent.evals.simulator.frameworks.trl import output_dir as trl_output_dir

T = Thresholds()


@dataclass(frozen=True)
class Row:
    step: int
    time: float
    num: StepNumbers
    window: tuple[StepNumbers, ...]
    """The steps the row averages (TRL's logging window; one step elsewhere)."""

    def mean(self, attr: str) -> float:
        values = [getattr(n, attr) for n in self.window]
        finite = [v for v in values if not math.isnan(v)]
        return sum(finite) / len(finite) if finite else math.nan

    def component(self, name: str) -> float:
        values = [dict((c, m) for c, m, _ in n.components).get(name, math.nan) for n in self.window]
        return sum(values) / len(values)


@dataclass
class Recorded:
    """A fixture's run as the simulator wrote it: each attempt's scenario and plan, and what was logged."""

    scenarios: list[FrameworkScenario]
    plans: list[Plan]
    growth: Growth
    rows: list[Row]
    end: float
    marks: dict[str, float]
    root: Path


# --- detectors: findings.md thresholds on the logged rows ----------------------------------------

Moment = tuple[int, float]
"""(signal step, epoch when the signal is unambiguous)."""


def _streak(rows: list[Row], value, holds, k: int) -> Row | None:
    n = 0
    for row in rows:
        v = value(row)
        n = n + 1 if not math.isnan(v) and holds(v) else 0
        if n >= k:
            return row
    return None


def _early(rows: list[Row], value) -> float | None:
    early = [v for v in (value(r) for r in rows[: T.early_steps * 2]) if not math.isnan(v)][: T.early_steps]
    return statistics.median(early) if len(early) >= T.min_baseline_points else None


def _entropy(rec: Recorded) -> Row | None:
    early = _early(rec.rows, lambda r: r.mean("entropy"))
    if early is None:
        return None
    return _streak(
        rec.rows,
        lambda r: r.mean("entropy"),
        lambda v: v < T.entropy_collapse_ratio * early or (v < T.entropy_collapse_abs and early >= 2 * T.entropy_collapse_abs),
        T.sustain_steps,
    )


def _truncation(rec: Recorded) -> Row | None:
    return _streak(rec.rows, lambda r: r.mean("clip_ratio"), lambda v: v > T.truncation_high, T.sustain_steps)


def _nan(rec: Recorded) -> Row | None:
    return next((r for r in rec.rows if any(n.nonfinite for n in r.window)), None)


def _kl(rec: Recorded) -> Row | None:
    if not rec.scenarios[0].use_kl:
        return None
    early = _early(rec.rows, lambda r: r.mean("kl"))
    if early is None:
        return None
    limit = min(T.kl_blowup_abs, T.kl_blowup_ratio * max(early, T.kl_early_floor))
    return _streak(rec.rows, lambda r: r.mean("kl"), lambda v: v > limit, T.kl_blowup_steps)


def _spread(row: Row) -> float:
    """Reward spread of a row (verl logs max and min; TRL and OpenRLHF a std, 0 exactly when max = min)."""
    return row.num.score_max - row.num.score_min


def _constant(rec: Recorded) -> Row | None:
    return _streak(rec.rows, _spread, lambda v: v <= T.reward_constant_eps, T.reward_constant_steps)


def _zero_adv(rec: Recorded) -> Row | None:
    if rec.scenarios[0].framework != "trl":
        return None  # only TRL logs the share of zero-std groups
    return _streak(rec.rows, lambda r: r.mean("zero_std_frac"), lambda v: v > 1 - T.zero_adv_trainable, T.sustain_steps)


def _format(rec: Recorded) -> Row | None:
    if rec.scenarios[0].framework != "trl" or "format_reward" not in FrameworkNumbers(rec.scenarios[0]).components:
        return None
    peak = 0.0
    streak = 0
    for row in rec.rows:
        v = row.component("format_reward")
        streak = streak + 1 if v < 0.5 * peak else 0
        peak = max(peak, v)
        if streak >= T.sustain_steps:
            return row
    return None


def _hacking(rec: Recorded) -> Row | None:
    sc = rec.scenarios[0]
    if sc.framework == "trl":
        if "tag_count_reward" not in FrameworkNumbers(sc).components:
            return None
        w, k = T.reward_smooth_steps, T.reward_regression_steps
        acc = [r.component("accuracy_reward") for r in rec.rows]
        tag = [r.component("tag_count_reward") for r in rec.rows]
        levels = [
            (statistics.fmean(acc[i - w + 1 : i + 1]), statistics.fmean(tag[i - w + 1 : i + 1])) for i in range(w - 1, len(acc))
        ]
        streak, best, best_tag = 0, -math.inf, 0.0
        for i, (a, g) in enumerate(levels):
            hacked = best > 0 and a < (1 - T.reward_regression_drop) * best and g > best_tag
            streak = streak + 1 if hacked else 0
            if a > best:
                best, best_tag = a, g
            if streak >= k:
                return rec.rows[i + w - 1]
        return None
    # verl: the validation accuracy falls 3 evals in a row (10 % in all) while the train score rises
    evals = [r for r in rec.rows if r.step % sc.test_every == 0]
    k = T.eval_regression_evals
    for i in range(k, len(evals)):
        chain = evals[i - k : i + 1]
        vals = [r.num.val_accuracy for r in chain]
        falling = all(b < a for a, b in itertools.pairwise(vals)) and vals[-1] < (1 - T.eval_regression_min_drop) * vals[0]
        train = [r.num.score for r in rec.rows if chain[0].step - 4 <= r.step <= chain[0].step]
        train_now = [r.num.score for r in rec.rows if chain[-1].step - 4 <= r.step <= chain[-1].step]
        if falling and statistics.fmean(train_now) > statistics.fmean(train) and sc.kind == "reward-hacking":
            return chain[-1]
    return None


def _degenerate(rec: Recorded) -> Moment | None:
    """The first saved sample file (verl rollout dump, TRL completions parquet) with > 20 % degenerate."""
    sc = rec.scenarios[0]
    if sc.framework == "verl":
        files = [(int(p.stem), p) for p in (rec.root / "rollouts").glob("*.jsonl")]
        count = sc.batch
    elif sc.framework == "trl":
        files = [
            (int(p.stem.split("_")[1]), p) for p in (rec.root / trl_output_dir(sc) / "completions").glob("completions_*.parquet")
        ]
        count = min(sc.batch, 16)
    else:
        return None  # OpenRLHF saves no completions (one `Sample:` line per step)
    nums = FrameworkNumbers(sc)
    for step, path in sorted(files):
        kinds = [s.kind for s in samples(sc, nums.at(step), count)]
        if kinds.count("degenerate") / len(kinds) > 0.2:
            return step, path.stat().st_mtime
    return None


ROW_DETECTORS = {
    "entropy_collapse": _entropy,
    "truncation_high": _truncation,
    "nan_detected": _nan,
    "kl_blowup": _kl,
    "reward_constant": _constant,
    "zero_advantage": _zero_adv,
    "format_collapse": _format,
    "reward_hacking": _hacking,
}
CRASH_IDS = ("run_crashed", "cuda_oom", "host_oom", "nccl_error", "inference_crashed", "reward_fn_error")


def expected_ids(sc: FrameworkScenario) -> tuple[list[str], list[str]]:
    """(expects, tolerates) of a scenario, adjusted to what its framework logs."""
    exp = sc.expectation
    expects = list(exp.expects)
    tolerates = list(exp.tolerates)
    if sc.kind == "reward-constant" and sc.framework != "trl":
        expects.remove("zero_advantage")  # verl/OpenRLHF log no zero-std share; saying it is still right
        tolerates.append("zero_advantage")
    if sc.finished and sc.framework in ("verl", "trl"):
        expects.append("run_finished")  # `Final validation metrics`, the `train_runtime` dict
    else:
        tolerates.append("run_finished")
    return expects, sorted(set(tolerates) - set(expects))


def moments(rec: Recorded) -> dict[str, Moment]:
    """Every detector that fires on the recording, with its signal step and unambiguous moment."""
    sc = rec.scenarios[0]
    out: dict[str, Moment] = {}
    for finding, detect in ROW_DETECTORS.items():
        row = detect(rec)
        if row is not None:
            out[finding] = (_signal_step(sc, finding, row), row.time)
    degenerate = _degenerate(rec)
    if degenerate is not None:
        out["degenerate_output"] = (sc.onset_step, degenerate[1])
    first = rec.plans[0]
    if first.exit_code == 1:
        crash_at = round(rec.growth.attempts[0]["end"], 3)
        write_at = max(w for sizes in rec.growth.appends.values() for _, w in sizes if w <= crash_at)
        for finding in CRASH_IDS:
            if finding in sc.expectation.expects:
                out[finding] = (sc.crash_step or 0, write_at)
    if sc.finished and rec.plans[-1].exit_code == 0 and sc.framework in ("verl", "trl"):
        out["run_finished"] = (sc.max_steps, rec.end)
    return out


def _signal_step(sc: FrameworkScenario, finding: str, row: Row) -> int:
    if finding == "nan_detected":
        return row.step
    return sc.onset_step if sc.kind != "healthy" else row.step
