"""Multi-node prime-rl runs for tests: the per-node and per-rank log tree of the runbook beside a
simulated run's rank-0 logs, one rank failing first (the others then time out in NCCL and torchrun
prints its `Root Cause` block), or one node going silent; and the runbook's sbatch layout: an
`rl.sbatch` whose job writes `job_<id>.log` into the run dir and, given prime-rl's resume flags
(which sbatch passes to the script), starts a new attempt from that checkpoint and trains on.

    logs/[attempt_N/]trainer.log -> trainer/node_0.log
    logs/[attempt_N/]trainer/node_<k>.log
    logs/[attempt_N/]trainer/torchrun/<rdzv>_<k>/attempt_0/<local_rank>/{stdout,stderr}.log
    logs/[attempt_N/]inference.log, inference/node_<k>.log, inference/router_0.log

`python -m rlagent.evals.simulator.multinode job [resume flags]` is the job body the sbatch script
runs; SIMJOB_MODE (`train`, `fail`), SIMJOB_STEPS, SIMJOB_PAUSE, SIMJOB_EXIT and SIMJOB_TREE (write a
multi-node tree) shape it.
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from .logfmt import loguru_line

RDZV = "f3a9c2e1"


@dataclass(frozen=True)
class Failure:
    node: int
    local_rank: int
    step: int
    """The step during which it fails (no step line of it)."""
    error: str = "RuntimeError: CUDA error: an illegal memory access was encountered"


@dataclass(frozen=True)
class Silence:
    node: int
    after_step: int
    """The node's last line is at this step; its peers go on."""


def _base(run_dir: Path, layout: str) -> Path:
    if layout == "H":
        latest = run_dir / "logs" / "latest"
        return latest.resolve() if latest.exists() else run_dir / "logs" / "attempt_1"
    return run_dir / "logs"


def _hms(moment: datetime) -> str:
    return moment.astimezone().strftime("%H:%M:%S")


def _step_line(n: int, step_s: float) -> str:
    return f"Step {n} | {step_s:>6.1f}s | Loss 0.0012 | Entropy 0.4410 | Grad. Norm 0.2143 | LR 3.00e-06"


def write_tree(
    run_dir: str | Path, layout: str = "H", *, trainer_nodes: int = 2, ranks_per_node: int = 4, inference_nodes: int = 1,
    steps: int = 20, step_s: float = 30.0, start: datetime | None = None, failure: Failure | None = None,
    silence: Silence | None = None,
) -> Path:  # fmt: skip
    """Write (or overwrite) the multi-node tree of the run's current attempt; returns its base."""
    root = Path(run_dir)
    base = _base(root, layout)
    start = start or datetime.now(UTC) - timedelta(seconds=steps * step_s + 60)
    hosts = [f"node-{i}" for i in range(inference_nodes + trainer_nodes)]  # inference first, then trainer
    trainer_dir, inference_dir = base / "trainer", base / "inference"
    trainer_dir.mkdir(parents=True, exist_ok=True)
    inference_dir.mkdir(parents=True, exist_ok=True)
    rank0 = base / "trainer.log"
    node0 = trainer_dir / "node_0.log"
    kept = rank0.read_bytes() if rank0.is_file() and not rank0.is_symlink() else b""
    fail_t = start + timedelta(seconds=failure.step * step_s - step_s / 2) if failure else None
    for node in range(trainer_nodes):
        node_lines: list[str] = []
        for local in range(ranks_per_node):
            rank_dir = trainer_dir / "torchrun" / f"{RDZV}_{node}" / "attempt_0" / str(local)
            rank_dir.mkdir(parents=True, exist_ok=True)
            out, err = [], []
            for n in range(1, steps + 1):
                if silence and node == silence.node and n > silence.after_step:
                    break
                if failure and n >= failure.step:
                    break
                moment = start + timedelta(seconds=n * step_s)
                out.append(loguru_line(_hms(moment), "INFO", f"micro-batches done for step {n}"))
                if local == 0 and not (node == 0 and kept):
                    node_lines.append(loguru_line(_hms(moment), "SUCCESS", _step_line(n, step_s)))
            if failure and fail_t:
                global_rank = node * ranks_per_node + local
                if (node, local) == (failure.node, failure.local_rank):
                    err.append(
                        "Traceback (most recent call last):\n"
                        '  File "/app/src/prime_rl/trainer/rl/train.py", line 412, in train\n'
                        "    loss.backward()\n"
                        f"{failure.error}\n"
                    )
                else:
                    later = fail_t + timedelta(seconds=600 + global_rank)
                    out.append(
                        loguru_line(
                            _hms(later),
                            "ERROR",
                            f"[Rank {global_rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, "
                            "OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
                        )
                    )
            (rank_dir / "stdout.log").write_text("".join(out))
            (rank_dir / "stderr.log").write_text("".join(err))
        if failure and fail_t and node == 0:
            fail_rank = failure.node * ranks_per_node + failure.local_rank
            end = fail_t + timedelta(seconds=660)
            node_lines.append(
                loguru_line(_hms(end), "ERROR", "Fatal error in train")
                + "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
                + "============================================================\n"
                + "train.py FAILED\n------------------------------------------------------------\n"
                + "Root Cause (first observed failure):\n[0]:\n"
                + f"  time      : {fail_t:%Y-%m-%d_%H:%M:%S}\n"
                + f"  host      : {hosts[inference_nodes + failure.node]}\n"
                + f"  rank      : {fail_rank} (local_rank: {failure.local_rank})\n"
                + "  exitcode  : 1 (pid: 4242)\n  error_file: <N/A>\n"
                + "============================================================\n"
            )
        path = trainer_dir / f"node_{node}.log"
        text = "".join(node_lines)
        if node == 0 and kept:
            path.write_bytes(kept + text.encode())
        else:
            path.write_text(text)
    if rank0.exists() or rank0.is_symlink():
        rank0.unlink()
    rank0.symlink_to(os.path.relpath(node0, base))
    for node in range(inference_nodes):
        lines = [
            f"INFO {start + timedelta(seconds=n * step_s):%m-%d %H:%M:%S} [loggers.py:123] Avg prompt throughput: 812 tokens/s\n"
            for n in range(1, steps + 1)
        ]
        (inference_dir / f"node_{node}.log").write_text("".join(lines))
    (inference_dir / "router_0.log").write_text(loguru_line(_hms(start), "INFO", "vllm-router listening on 0.0.0.0:8000"))
    return base


def write_many_ranks(run_dir: str | Path, layout: str = "H", *, files: int = 256, lines: int = 50) -> Path:
    """A tree with `files` rank files (stdout and stderr of files/2 ranks over 8 nodes)."""
    ranks = max(1, files // 2)
    per_node = max(1, ranks // 8)
    return write_tree(run_dir, layout, trainer_nodes=max(1, ranks // per_node), ranks_per_node=per_node, steps=lines)


# --- the sbatch layout -------------------------------------------------------------------------

SBATCH = """#!/bin/bash
#SBATCH --job-name={name}
#SBATCH --output={run_dir}/job_%j.log
#SBATCH --chdir={run_dir}
#SBATCH --time={minutes}
# prime-rl run {name}: the launcher's job. sbatch passes extra arguments (resume flags) on to it.
set -e
export PYTHONUNBUFFERED=1
exec {python} -m rlagent.evals.simulator.multinode job --layout {layout} "$@"
"""


def write_sbatch(run_dir: str | Path, *, layout: str = "H", name: str | None = None, minutes: int = 10) -> Path:
    root = Path(run_dir).resolve()
    path = root / "rl.sbatch"
    path.write_text(SBATCH.format(name=name or root.name, run_dir=root, minutes=minutes, python=sys.executable, layout=layout))
    path.chmod(0o755)
    return path


def _flag(argv: list[str], name: str) -> str | None:
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


def _new_attempt(run_dir: Path) -> Path:
    logs = run_dir / "logs"
    numbers = [int(m.group(1)) for p in logs.glob("attempt_*") if (m := re.fullmatch(r"attempt_(\d+)", p.name))]
    attempt = logs / f"attempt_{max(numbers, default=0) + 1}"
    attempt.mkdir(parents=True)
    latest = logs / "latest"
    if latest.is_symlink() or latest.exists():
        latest.unlink()
    latest.symlink_to(attempt.name)
    return attempt


def job(argv: list[str]) -> int:
    """The body of the simulated sbatch job: prints like prime-rl's launcher into job_<id>.log,
    starts a new attempt (H) or appends to the logs (L) and writes a trainer step line every
    SIMJOB_PAUSE seconds from the resume step on; `fail` mode exits SIMJOB_EXIT after its steps."""
    layout = _flag(argv, "--layout") or "H"
    run_dir = Path.cwd()
    mode = os.environ.get("SIMJOB_MODE", "train")
    steps = int(os.environ.get("SIMJOB_STEPS", "1000"))
    pause = float(os.environ.get("SIMJOB_PAUSE", "0.5"))
    resume = _flag(argv, "--resume.step") if layout == "H" else _flag(argv, "--ckpt.resume-step")
    first = int(resume) + 1 if resume else 1
    print(f"job {os.environ.get('SLURM_JOB_ID')} on {os.environ.get('SLURMD_NODENAME')}: rl {' '.join(argv)}", flush=True)
    if layout == "H":
        base = _new_attempt(run_dir)
    else:
        base = run_dir / "logs"
        base.mkdir(parents=True, exist_ok=True)
    if os.environ.get("SIMJOB_TREE"):  # a multi-node tree beside the rank-0 log, written as the job starts
        write_tree(run_dir, layout, steps=3, step_s=pause, start=datetime.now(UTC) - timedelta(seconds=4 * pause))
    trainer = base / "trainer.log"
    with open(trainer, "a", encoding="utf-8") as out:
        if resume:
            out.write(loguru_line(_hms(datetime.now(UTC)), "INFO", f"Resuming training from checkpoint step {resume}"))
        for n in range(first, first + steps):
            time.sleep(pause)
            out.write(loguru_line(_hms(datetime.now(UTC)), "SUCCESS", _step_line(n, pause)))
            out.flush()
    if mode == "fail":
        code = int(os.environ.get("SIMJOB_EXIT", "1"))
        print(f"Error: Trainer failed with exit code {code}", flush=True)
        return code
    print("Training finished!", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover - run inside SLURM jobs
    if sys.argv[1:2] == ["job"]:
        sys.exit(job(sys.argv[2:]))
    sys.exit(f"usage: {sys.argv[0]} job [--layout H|L] [resume flags]")
