"""H's `metrics.jsonl` rows, as prime-rl's file monitor writes them (formats doc section 2).

Trainer and orchestrator append to the same file: per trainer step five rows (perf, optim,
tensor stats, time, disk), per orchestrator step one large row, per eval env one row with a
float step. Each row is `{"step": N, "time": <unix>, ...}`; non-finite values are dropped
(and the trainer logs a WARNING naming them), so NaN never reaches the file.
"""

from __future__ import annotations

import json
import math
import random

from . import shapes
from .dynamics import EvalStats, StepStats
from .rng import lognormal, stream
from .scenario import Scenario

TIMING_KEYS = ("setup", "agent", "finalize", "scoring", "agent/model", "agent/harness", "total")
DISK_TOTAL_GIB = 1862.62


def _r(x: float) -> float:
    """Six significant digits: realistic-looking, and keeps a 60-step run under a megabyte."""
    return x if not math.isfinite(x) else float(f"{x:.6g}")


def drop_non_finite(row: dict[str, object]) -> tuple[dict[str, object], list[str]]:
    kept: dict[str, object] = {}
    dropped: list[str] = []
    for key, value in row.items():
        if isinstance(value, float) and not math.isfinite(value):
            dropped.append(key)
        else:
            kept[key] = value
    return kept, dropped


def dropping_warning(dropped: list[str]) -> str:
    """`monitors/file.py`: the count, then at most five keys (no marker when cut)."""
    return f"Dropping {len(dropped)} non-finite value(s) from metrics.jsonl: {', '.join(dropped[:5])}"


def dumps(step: int | float, epoch: float, metrics: dict[str, object]) -> str:
    """One line exactly as `FileMonitor.log` writes it (`step` first, then `time`)."""
    row = {"step": step, "time": epoch, **metrics}
    return json.dumps(row) + "\n"


def _dist(prefix: str, mean: float, lo: float, hi: float, counts: bool = False) -> dict[str, float]:
    """mean/max/min/p10/p90 of a per-episode quantity; counts (tokens, turns) have integral extremes."""
    if counts:
        lo, hi = float(math.floor(lo)), float(math.ceil(hi))
    span = hi - lo
    return {
        f"{prefix}/mean": _r(mean),
        f"{prefix}/max": _r(hi),
        f"{prefix}/min": _r(lo),
        f"{prefix}/p10": _r(max(lo, mean - 0.32 * span)),
        f"{prefix}/p90": _r(min(hi, mean + 0.32 * span)),
    }


# ---- trainer --------------------------------------------------------------------------------


def trainer_rows(
    sc: Scenario, st: StepStats, step_time: float, wait: float, save: float, ckpts_so_far: int
) -> list[dict[str, object]]:
    """The five rows of one trainer step, before non-finite values are dropped."""
    r = stream(sc.seed, "trow", st.step)
    perf = {
        "perf/throughput": _r(st.throughput),
        "perf/throughput_per_gpu": _r(st.throughput / sc.trainer_gpus),
        "perf/mfu": _r(st.mfu),
        "perf/peak_memory": _r(st.peak_mem_gib),
    }
    optim = {"optim/lr": st.lr, "optim/grad_norm": _r(st.grad_norm)}
    tensors = _tensor_stats(sc, st, r)
    fwd = step_time - wait - save - 0.9
    times = {
        "time/step": _r(step_time),
        "time/wait_for_batch": _r(wait),
        "time/load_data": _r(0.12 * lognormal(r, 0.2)),
        "time/broadcast_weights": _r(0.7 * lognormal(r, 0.1)),
        "time/save_ckpt": _r(save),
        "time/forward_backward": _r(max(fwd, 0.1)),
    }
    disk = _disk_stats(sc, st.step, ckpts_so_far)
    return [perf, optim, tensors, times, disk]


def _tensor_stats(sc: Scenario, st: StepStats, r: random.Random) -> dict[str, object]:
    """Loss, entropy and mismatch KL (overall and per env), masking, reference KL: NaN on a
    non-finite step."""
    nan_or = (lambda v: math.nan) if st.nonfinite else _r
    loss_sd = abs(st.loss) * 3 + 0.002
    tensors: dict[str, object] = {
        "loss/mean": nan_or(st.loss),
        "loss/median": nan_or(st.loss * 0.8),
        "loss/std": nan_or(loss_sd),
        "loss/min": nan_or(st.loss - 3 * loss_sd),
        "loss/max": nan_or(st.loss + 3 * loss_sd),
    }
    for scope in ("all", *sc.envs) if len(sc.envs) > 1 else ("all",):
        f = 1.0 if scope == "all" else lognormal(r, 0.05)
        tensors |= {
            f"entropy/{scope}/mean": nan_or(st.entropy * f),
            f"entropy/{scope}/std": nan_or(st.entropy * 0.9 * f),
            f"entropy/{scope}/max": nan_or(st.entropy * 11 * f),
        }
    for scope in ("all", *sc.envs) if len(sc.envs) > 1 else ("all",):
        f = 1.0 if scope == "all" else lognormal(r, 0.1)
        tensors |= {
            f"mismatch_kl/{scope}/mean": nan_or(st.mismatch_kl * f),
            f"mismatch_kl/{scope}/std": nan_or(st.mismatch_kl * 2.5 * f),
            f"mismatch_kl/{scope}/max": nan_or(st.mismatch_kl * 40 * f),
        }
    masked = 0.002 * lognormal(r, 0.3)
    tensors |= {
        "masked_mismatch_kl/mean": nan_or(st.mismatch_kl * 6),
        "masked_mismatch_kl/max": nan_or(st.mismatch_kl * 40),
        "unmasked_mismatch_kl/mean": nan_or(st.mismatch_kl * 0.98),
        "unmasked_mismatch_kl/max": nan_or(st.mismatch_kl * 12),
        "is_masked/mean": _r(masked),
        "is_masked/max": 1.0,
        "is_masked_low/mean": _r(masked * 0.4),
        "is_masked_low/max": 1.0,
        "is_masked_high/mean": _r(masked * 0.6),
        "is_masked_high/max": 1.0,
        "masked_advantage_positive/mean": _r(masked * 0.5),
        "masked_advantage_positive/max": 1.0,
        "masked_advantage_negative/mean": _r(masked * 0.5),
        "masked_advantage_negative/max": 1.0,
        "kl_ent_ratio/mean": nan_or(st.mismatch_kl / max(st.entropy, 1e-6)),
    }
    if st.ref_kl is not None:
        spread = st.ref_kl * 1.4
        tensors |= {
            "ref_kl/mean": nan_or(st.ref_kl),
            "ref_kl/median": nan_or(st.ref_kl * 0.7),
            "ref_kl/std": nan_or(spread),
            "ref_kl/min": nan_or(0.0),
            "ref_kl/max": nan_or(st.ref_kl * 18),
        }
    return tensors


CKPTS_ON_DISK = 20
"""Checkpoints a run keeps on disk: older ones are deleted as new ones are written, so a healthy
run's disk use levels off (every fixture's run stays below this many, so their bytes are unchanged)."""


def _disk_stats(sc: Scenario, step: int, ckpts_so_far: int) -> dict[str, object]:
    """The checkpoint filesystem: fills a little with each checkpoint kept (or as a failure says)."""
    used = 310.0 + 7.4 * min(ckpts_so_far, CKPTS_ON_DISK)
    ratio = shapes.disk_free_ratio(sc, step, (DISK_TOTAL_GIB - used - 1100.0) / DISK_TOTAL_GIB)
    free = ratio * DISK_TOTAL_GIB
    disk = {
        "system/ckpt_disk_free_gib": _r(free),
        "system/ckpt_disk_used_gib": _r(DISK_TOTAL_GIB - free),
        "system/ckpt_disk_total_gib": DISK_TOTAL_GIB,
        "system/ckpt_disk_free_ratio": _r(ratio),
    }
    return disk


# ---- orchestrator ---------------------------------------------------------------------------

REWARD_NAMES = {"reverse-text": "lcs_reward_func", "alphabet-sort": "order_reward"}


def reward_name(env: str) -> str:
    return REWARD_NAMES.get(env, "correct_answer_reward_func")


def _subset(scope: str, subset: str, st: StepStats, reward: float, trunc: float, out: float, sc: Scenario) -> dict:
    row: dict[str, object] = {}
    inp = st.input_tokens
    p = f"{scope}/{subset}"
    turns_hi = st.turns * 1.6 if sc.turns > 1 else 1.0
    row |= _dist(f"{p}/num_total_tokens", inp + out, inp + st.output_tokens_min, inp + st.output_tokens_max, True)
    row |= _dist(f"{p}/num_input_tokens", inp, inp * 0.7, inp * 1.4, True)
    row |= _dist(f"{p}/num_output_tokens", out, st.output_tokens_min, st.output_tokens_max, True)
    row |= _dist(f"{p}/num_turns", st.turns, max(1.0, st.turns * 0.5), turns_hi, True)
    row |= _dist(f"{p}/num_branches", 1.0, 1.0, 1.0, True)
    if subset == "all":
        row[f"{scope}/all/has_error/mean"] = _r(st.error)
        row[f"{scope}/all/cancelled/mean"] = _r(st.cancelled)
    a = f"{scope}/{subset}/agent"
    row |= {
        f"{a}/reward/mean": _r(reward),
        f"{a}/reward/max": _r(st.reward_max),
        f"{a}/reward/min": _r(st.reward_min),
        f"{a}/reward/p10": _r(st.reward_p10),
        f"{a}/reward/p90": _r(st.reward_p90),
        f"{a}/is_truncated/mean": _r(trunc),
        f"{a}/is_completed/mean": _r(1 - trunc - (st.error if subset == "all" else 0.0)),
    }
    model_s = st.gen_s * 0.55
    for key in TIMING_KEYS:
        base = {"setup": 0.02, "agent": model_s * 1.05, "finalize": 0.004, "scoring": 0.003}.get(
            key, model_s if key == "agent/model" else model_s * 0.05 if key == "agent/harness" else model_s * 1.07
        )
        row[f"{a}/timing/{key}/mean"] = _r(base)
    for env in sc.envs if scope == "train/agg" else [scope.split("/", 1)[1]]:
        name = reward_name(env)
        row |= {
            f"{a}/metrics/{name}/mean": _r(reward),
            f"{a}/metrics/{name}/max": _r(st.reward_max),
            f"{a}/metrics/{name}/min": _r(st.reward_min),
            f"{a}/rewards/{name}/mean": _r(reward),
            f"{a}/rewards/{name}/max": _r(st.reward_max),
            f"{a}/rewards/{name}/min": _r(st.reward_min),
        }
    row[f"{a}/stop_condition/completed"] = _r(1 - trunc)
    row[f"{a}/stop_condition/generation_truncated"] = _r(trunc)
    row[f"{a}/is_trainable/mean"] = _r(st.trainable / st.effective)
    row[f"{a}/is_admitted/mean"] = 1.0
    if subset == "all":
        row[f"{a}/has_error/mean"] = _r(st.error)
        row[f"{a}/cancelled/mean"] = _r(st.cancelled)
        if st.failed:
            row[f"{a}/error/TimeoutError"] = float(st.failed)
        solved_all = max(0.0, reward - 0.55) * 0.4
        solved_none = max(0.0, 0.35 - reward) * 0.5
        row[f"{a}/solved_none"] = _r(solved_none)
        row[f"{a}/solved_all"] = _r(solved_all)
        row[f"{a}/solved_some"] = _r(1 - solved_all - solved_none)
    return row


def orchestrator_row(
    sc: Scenario, st: StepStats, step_time: float, wait_for_policy: float, save: float, cum: tuple[float, int, int]
) -> dict[str, object]:
    scopes: list[tuple[str, float, float, float]] = [("train/agg", st.reward, st.truncation, st.output_tokens)]
    if len(st.envs) > 1:
        scopes += [(f"train/{e.name}", e.reward, e.truncation, e.output_tokens) for e in st.envs]
    row: dict[str, object] = {}
    for scope, reward, trunc, out in scopes:
        for subset in ("all", "effective"):
            row |= _subset(scope, subset, st, reward, trunc, out, sc)
    tokens = st.effective * (st.input_tokens + st.output_tokens)
    total_tokens, total_rollouts, total_tasks = cum
    row |= {
        "progress/tokens": _r(tokens),
        "progress/input_tokens": _r(st.effective * st.input_tokens),
        "progress/output_tokens": _r(st.effective * st.output_tokens),
        "progress/rollouts": st.effective,
        "progress/tasks": st.effective // sc.group_size,
        "progress/total_tokens": round(total_tokens),
        "progress/total_rollouts": total_rollouts,
        "progress/total_tasks": total_tasks,
        "time/step": _r(step_time),
        "time/pack": _r(0.05 + 0.0004 * st.effective),
        "time/save_ckpt": _r(save),
        "time/wait_for_policy": _r(wait_for_policy),
        "off_policy/mean": _r(min(st.off_policy_max, 0.6 + 0.1 * st.off_policy_max)),
        "off_policy/max": float(st.off_policy_max),
        "off_policy/in_flight/mean": 0.4,
        "off_policy/in_flight/max": 1.0,
        "off_policy/in_queue/mean": 0.0,
        "off_policy/in_queue/max": 0.0,
        "off_policy/dropped": 0.0,
    }
    for e in st.envs:
        row[f"batch/{e.name}"] = round(st.effective * e.ratio)
        row[f"curriculum/{e.name}/admission_rate"] = 1.0
    return row


def eval_row(ev: EvalStats, policy: int, k: int) -> dict[str, object]:
    row: dict[str, object] = {}
    for subset in ("all", "effective"):
        p = f"eval/{ev.env}/{subset}"
        row |= _dist(f"{p}/num_output_tokens", ev.output_tokens, ev.output_tokens * 0.2, ev.output_tokens * 2.1, True)
        row |= _dist(f"{p}/num_turns", ev.turns, ev.turns, ev.turns, True)
        row |= {
            f"{p}/agent/reward/mean": _r(ev.reward),
            f"{p}/agent/is_truncated/mean": _r(ev.truncation),
            f"{p}/agent/avg@{k}": _r(ev.avg_at_k),
        }
        if subset == "all":
            row[f"{p}/has_error/mean"] = _r(ev.error)
        else:
            row[f"{p}/agent/pass@{k}"] = _r(ev.pass_at_k)
    row[f"eval/{ev.env}/policy_version"] = float(policy)
    return row
