"""A large H run for benchmarks: about `target_bytes` of realistic logs, written fast.

A multi-turn, two-env run with big batches: most bytes are vLLM access lines (one per model
call) and the orchestrator's pipeline view, with step lines, metrics rows, warnings and the
occasional traceback in between, as in a real multi-day run. Generation is the normal
simulator path; its bulk text is bytes slices of a pre-built request ring, so 1 GB takes
seconds. `append_big_h_run` then adds about N more bytes of the next steps, for the
"warm check-in" benchmark (the monitor has already read the first part).
"""

from __future__ import annotations

import json
from pathlib import Path

from .scenario import Scenario
from .writer import _write, append_run


def big_h_scenario(seed: int = 0) -> Scenario:
    return Scenario(
        name="big-h",
        layout="H",
        seed=seed,
        steps=1,
        max_steps=20000,
        step_time_s=300.0,
        envs=["wiki-search", "math-python"],
        batch_size=1024,
        group_size=16,
        turns=10.0,
        prompt_tokens=900,
        max_completion_tokens=4096,
        seq_len=16384,
        ckpt_interval=50,
        eval_interval=50,
        eval_examples=64,
        rollout_steps_kept=1,
        trace_fail_rate=0.01,
        trainer_gpus=4,
        inference_gpus=4,
    )


def write_big_h_run(out_dir: str | Path, target_bytes: int = 1 << 30, *, seed: int = 0, overwrite: bool = True) -> Path:
    """Write an H run of about `target_bytes` (logs + metrics) into `out_dir`."""
    root, _ = _write(big_h_scenario(seed), Path(out_dir), overwrite=overwrite, stop_bytes=target_bytes)
    return root


def last_trainer_step(run_dir: str | Path, tail_bytes: int = 4 << 20) -> int:
    """The newest trainer step in an H run's metrics.jsonl (trainer rows carry `optim/lr`)."""
    path = Path(run_dir) / "metrics.jsonl"
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - tail_bytes))
        lines = f.read().splitlines()
    for line in reversed(lines):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if "optim/lr" in row:
            return int(row["step"])
    raise ValueError(f"no trainer row in the last {tail_bytes} bytes of {path}")


def append_big_h_run(run_dir: str | Path, n_bytes: int, *, seed: int = 0) -> int:
    """Append about `n_bytes` of the next steps to a run made by `write_big_h_run` (same seed).
    Returns the new last trainer step."""
    scenario = big_h_scenario(seed).model_copy(update={"steps": last_trainer_step(run_dir)})
    return append_run(scenario, run_dir, stop_bytes=n_bytes).steps
