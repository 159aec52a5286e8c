"""The launcher's own output (`uv run rl`): start-up, then the line that ends the run.

prime-rl's launcher logs with the same loguru format. A local run prints this to the Launcher
terminal only (never under `logs/`), followed by a `tail -F` of orchestrator.log; a SLURM run's
job writes the same to `job_<id>.log`. A failed child ends it with `Error: <Name> failed with
exit code N` and `Terminating all processes...`, the launcher exiting 1.
"""

from __future__ import annotations

from .events import Event, Sim

STARTUP_DONE_S = 1.5
"""When the launcher has started every child and begins tailing orchestrator.log."""


def startup(sim: Sim) -> list[Event]:
    sc = sim.sc
    lines: list[tuple[str, str]] = []
    if sc.resume_step is not None:
        lines.append(("INFO", f"Resuming from step {sc.resume_step}, cleaning future rollouts and broadcasts"))
    else:
        lines.append(("INFO", "Training from scratch, cleaning any stale rollouts and broadcasts"))
    infer = list(range(sc.inference_gpus))
    train = list(range(sc.inference_gpus, sc.inference_gpus + sc.trainer_gpus))
    mapping = ", ".join(f"{i}: {i}" for i in infer + train)
    lines += [
        ("INFO", f"Wrote subconfigs to {sim.run_dir}/configs"),
        ("INFO", f"Using local->physical GPU mapping: {{{mapping}}}"),
        ("INFO", "Starting RL run"),
        ("INFO", f"Starting inference on GPU(s) {' '.join(map(str, infer))}"),
        # H starts one env server per source (L's orchestrator spawns them, logging at DEBUG)
        *(("INFO", f"Starting train env server {env} at tcp://127.0.0.1:{5600 + i}") for i, env in enumerate(sc.envs) if sim.h),
        ("INFO", "Starting orchestrator process"),
        ("INFO", f"Starting trainer on GPU(s) {' '.join(map(str, train))}"),
    ]
    out = [sim.log(0.2 + 0.05 * i, "launcher", level, msg) for i, (level, msg) in enumerate(lines)]  # type: ignore[arg-type]
    out.append(sim.log(STARTUP_DONE_S, "launcher", "SUCCESS", "Startup complete. Showing orchestrator logs..."))
    return out


def failed(sim: Sim, name: str, exit_code: int, t: float) -> list[Event]:
    return [
        sim.log(t, "launcher", "ERROR", f"Error: {name} failed with exit code {exit_code}"),
        sim.log(t + 0.001, "launcher", "ERROR", "Terminating all processes..."),
    ]


def finished(sim: Sim, t: float) -> list[Event]:
    return [sim.log(t, "launcher", "SUCCESS", "Training finished!" if sim.h else "RL training finished!")]


def interrupted(sim: Sim, t: float, sigterm: bool = False) -> list[Event]:
    message = (
        "Received SIGTERM, terminating all processes..." if sigterm else "Received interrupt signal, terminating all processes..."
    )
    return [sim.log(t, "launcher", "WARNING", message)]


def tail(events: list[Event]) -> list[Event]:
    """What the launcher's `tail -F orchestrator.log` adds to its own output."""
    return [Event(max(e.t, STARTUP_DONE_S) + 0.05, "launcher", e.text, "launcher") for e in events if e.stream == "orchestrator"]


def job_id(sim: Sim) -> int:
    return 100000 + (sim.sc.seed * 7919) % 800000


def oom_kill(sim: Sim, t: float) -> Event:
    """slurmstepd's note at the end of a job whose cgroup hit its memory limit."""
    return Event(
        t,
        "launcher",
        f"slurmstepd: error: Detected 1 oom_kill event in StepId={job_id(sim)}.batch. "
        "Some of the step tasks have been OOM Killed.\n",
    )
