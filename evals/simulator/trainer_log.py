"""The trainer's output: `trainer.log` lines and its five metrics rows per step.

`trainer.log` is torchrun's tee of rank 0, so every line the trainer prints starts with
`[trainer0]:`; torchrun's own messages (the OMP warning, the ChildFailedError block after a
crash) are the agent's stderr and carry no prefix. C++ lines of rank 0 (the NCCL watchdog) carry
both torchrun's prefix and c10's own `[rank0]:`.
"""

from __future__ import annotations

from .events import Event, Sim
from .logfmt import prefix_lines
from .metrics import drop_non_finite, dropping_warning, dumps, trainer_rows
from .rng import stream
from .steplines import trainer_step
from .tracebacks import child_failed_block, cuda_oom_message, nccl_watchdog_lines, render, trainer_oom_frames

OMP_WARNING = (
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system "
    "being overloaded, please further tune the variable for optimal performance in your application as needed. "
)


def startup(sim: Sim) -> list[Event]:
    t = sim.tl.trainer_start
    out: list[Event] = []
    if sim.sc.trainer_gpus > 1:
        where = "torch/distributed/run.py:766"
        for msg in ("", "*****************************************", OMP_WARNING, "*****************************************"):
            out.append(Event(t, "trainer", sim.clock.glog(t, "W", sim.pid["torchrun"], where) + msg + "\n"))
    out += [
        sim.log(t + 3.1, "trainer", "INFO", f"Starting RL trainer (model={sim.sc.model}, world_size={sim.sc.trainer_gpus})"),
        sim.log(
            t + 3.4,
            "trainer",
            "WARNING",
            "No NVLink detected, disabling NCCL P2P and SHM transports. "
            "Set NCCL_P2P_DISABLE=0 and NCCL_SHM_DISABLE=0 to override.",
        ),
    ]
    # A fresh run says nothing about checkpoints; `No checkpoints found in ... Starting from
    # scratch.` is a WARNING of a `--resume` that finds none (utils/pathing.py).
    resume = sim.sc.resume_step
    if resume is not None:
        out.append(sim.log(t + 4.0, "trainer", "INFO", f"Resuming training from checkpoint step {resume}"))
    if sim.h:
        out.append(
            sim.log(
                t + 4.2,
                "trainer",
                "INFO",
                f"Logging metrics to {sim.run_dir}/metrics.jsonl and episodes to {sim.run_dir}/rollouts",
            )
        )
    tokens, samples, _ = sim.dyn.cumulative(resume or 0)
    start = f"Starting from step {sim.sc.first_step} (total_tokens={round(tokens)}, total_samples={samples})"
    out.append(sim.log(sim.tl.trainer_ready, "trainer", "INFO", start))
    return out


def step(sim: Sim, n: int) -> list[Event]:
    tl, sc = sim.tl, sim.sc
    tl.ensure(n)
    st = sim.dyn.at(n)
    end = tl.end[n]
    seconds = tl.trainer_step_time(n)
    out: list[Event] = []
    if tl.save_ckpt[n]:
        # A save that leaves no `.metadata` (checkpoint-failure) is silent here: prime-rl has no
        # save-error message (a save that raises is a `Fatal error in train`).
        out.append(sim.log(end - tl.save_ckpt[n], "trainer", "INFO", f"Saving checkpoint at step {n}"))
    out.append(sim.log(end, "trainer", "SUCCESS", trainer_step(sim.layout, n, seconds, st)))
    if sim.h:
        rows = trainer_rows(sc, st, seconds, tl.wait_for_batch[n], tl.save_ckpt[n], n // sc.ckpt_interval)
        for i, row in enumerate(rows):
            t = end + 0.002 * (i + 1)
            kept, dropped = drop_non_finite(row)
            if dropped:
                out.append(sim.log(t, "trainer", "WARNING", dropping_warning(dropped)))
            out.append(Event(t, "metrics", dumps(n, round(sim.clock.epoch(t), 6), kept), "trainer"))
    # the orchestrator pushes the new policy to vLLM once the broadcast is STABLE
    out.append(
        Event(
            tl.broadcast[n] + 0.25,
            "inference",
            f'INFO:     127.0.0.1:{40000 + n % 20000} - "POST /update_weights HTTP/1.1" 200 OK\n',
        )
    )
    return out


def finish(sim: Sim) -> list[Event]:
    end = sim.tl.end[sim.sc.max_steps]
    return [
        sim.log(end + 0.6, "trainer", "INFO", f"Saving checkpoint at step {sim.sc.max_steps}"),
        sim.log(end + 3.2, "trainer", "SUCCESS", "RL trainer finished!"),
    ]


def crash(sim: Sim) -> list[Event]:
    """CUDA OOM in `loss.backward()` at the onset step, then torchrun's ChildFailedError."""
    sc, tl = sim.sc, sim.tl
    c = tl.crash_time()
    r = stream(sc.seed, "oom")
    alloc = 1.5 + 2.5 * r.random() * sc.severity
    in_use = 78.4 + 0.5 * r.random()
    message = cuda_oom_message(alloc, 79.19, 79.19 * 1024 - in_use * 1024 - 1.5 * r.random() * 100, in_use)
    exc = render(trainer_oom_frames(sc.seed, sc.model), "torch.OutOfMemoryError", message)
    where = "torch/distributed/elastic/multiprocessing/api.py:874"
    block = child_failed_block(
        sim.clock.glog(c + 1.1, "E", sim.pid["torchrun"], where),
        sim.clock.stamp(c),
        sim.host,
        sim.pid["trainer"],
    )
    return [sim.log(c, "trainer", "ERROR", "Fatal error in train", exc), Event(c + 1.1, "trainer", block)]


def nccl_crash(sim: Sim) -> list[Event]:
    """The NCCL watchdog aborts rank 0 (SIGABRT) after a collective hung for the timeout; its
    C++ lines have no loguru head. torchrun stops the other rank and reports exit code -6."""
    sc, tl = sim.sc, sim.tl
    c = tl.crash_time()
    seq = 38 * sc.onset_step + stream(sc.seed, "nccl").randrange(38)
    lines = nccl_watchdog_lines(sim.clock.local(c), seq, sc.seed)
    api = "torch/distributed/elastic/multiprocessing/api.py"
    other = sim.pid["trainer"] + 1
    sigterm = (
        sim.clock.glog(c + 0.9, "W", sim.pid["torchrun"], f"{api}:908") + f"Sending process {other} closing signal SIGTERM\n"
    )
    block = child_failed_block(
        sim.clock.glog(c + 1.3, "E", sim.pid["torchrun"], f"{api}:882"),
        sim.clock.stamp(c),
        sim.host,
        sim.pid["trainer"],
        exitcode=-6,
        traceback=f"Signal 6 (SIGABRT) received by PID {sim.pid['trainer']}",
    )
    return [Event(c, "trainer", prefix_lines(lines)), Event(c + 0.9, "trainer", sigterm), Event(c + 1.3, "trainer", block)]
