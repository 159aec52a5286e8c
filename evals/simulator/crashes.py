"""How a run ends when a failure kills it: who dies, with which exit code, and what it prints.

The failing process writes its last lines (a traceback, torchrun's ChildFailedError, C++
watchdog lines, or nothing when the kernel SIGKILLs it) and exits; the launcher notices within
its 1 s poll, prints `Error: <Name> failed with exit code N` and terminates the others, whose
logs end a moment later. A live run does the same for real; the offline writer uses the
`deaths` times to cut every stream where its process would have been killed.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import inference_log, launcher_log, orchestrator_log, trainer_log
from .events import Event, Sim

_KILLED_AFTER_S = {"trainer": 0.5, "orchestrator": 0.6, "inference": 1.2}
_ENV_KILLED_AFTER_S = 1.0


@dataclass(frozen=True)
class CrashPlan:
    proc: str
    """The process that fails: `trainer` or `orchestrator`."""
    name: str
    """The launcher's name for it (`process_name.capitalize()`)."""
    exit_code: int
    time: float
    """The failure itself (the `Fatal error` line, the watchdog abort, the OOM kill)."""
    exit_time: float
    """When the failing process is gone (after torchrun's report)."""

    @property
    def launcher_time(self) -> float:
        return self.exit_time + 0.35


def plan(sim: Sim) -> CrashPlan | None:
    sc, tl = sim.sc, sim.tl
    if not sc.crashes:
        return None
    c = tl.crash_time()
    if sc.kind == "crash-oom":
        return CrashPlan("trainer", "Trainer", 1, c, c + 1.15)
    if sc.kind == "crash-nccl":
        return CrashPlan("trainer", "Trainer", 1, c, c + 1.35)
    if sc.kind == "host-oom":
        return CrashPlan("trainer", "Trainer", -9, c, c)
    return CrashPlan("orchestrator", "Orchestrator", 1, c, c + 0.05)


def deaths(sim: Sim) -> dict[str, float]:
    """Process -> time after which it writes nothing (killed, or silent while it hangs)."""
    out: dict[str, float] = {}
    p = plan(sim)
    if p is not None:
        kill = p.launcher_time
        out = {proc: kill + dt for proc, dt in _KILLED_AFTER_S.items()}
        out |= {f"env:{env}": kill + _ENV_KILLED_AFTER_S for env in sim.sc.envs}
        out[p.proc] = p.exit_time
        out["launcher"] = kill + 2.0
    if sim.sc.kind == "inference-unreachable" and sim.sc.ends_early:
        out["inference"] = min(out.get("inference", float("inf")), sim.tl.inference_down() + 0.01)
    return out


def outage_events(sim: Sim) -> list[Event]:
    """Lines written before the crash by a process that fails silently afterwards."""
    if sim.sc.kind == "inference-unreachable" and sim.sc.ends_early:
        return inference_log.engine_died(sim, sim.tl.inference_down())
    return []


def crash_events(sim: Sim) -> list[Event]:
    """The failing process's last lines and the launcher's (the latter reach the disk only in
    a SLURM job log)."""
    p = plan(sim)
    if p is None:
        return []
    kind = sim.sc.kind
    if kind == "crash-oom":
        out = trainer_log.crash(sim)
    elif kind == "crash-nccl":
        out = trainer_log.nccl_crash(sim)
    elif kind == "host-oom":
        out = []  # SIGKILL: no traceback, no torchrun report
    else:
        out = orchestrator_log.crash(sim)
    out += launcher_log.failed(sim, p.name, p.exit_code, p.launcher_time)
    if kind == "host-oom" and sim.sc.slurm:
        out.append(launcher_log.oom_kill(sim, p.launcher_time + 1.2))
    return out
