"""A run's SLURM side, probed live: its jobs (tools.slurm_jobs.find_run_jobs: job_<id>.log files, the
sbatch script, squeue matched by working directory, output path, comment or name), and the
PRIME-RL processes on the nodes of its running job, seen with `srun --jobid J --overlap` (a
read-only `ps` job step beside the job's own) or, when configured, `ssh NODE ps`. Every command is
bounded (tools.slurm.run_command); an unreachable node, a missing srun, an unknown job become
notes. Nothing here raises on them.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rlagent.models.cluster import NodeProcesses
from rlagent.models.slurm import SlurmJob, SlurmReport
from rlagent.tools import slurm, slurm_jobs

TITLES = ("PRIME-RL::", "Verifiers::")
MAX_SSH_NODES = 16
_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")


@dataclass(frozen=True)
class SlurmSettings:
    env: Mapping[str, str] | None = None
    """Environment of the SLURM commands (None: this process's)."""
    timeout: float = slurm.DEFAULT_TIMEOUT
    probe_nodes: bool = True
    """Look at the processes on the running job's nodes."""
    ssh: bool = False
    """Fall back to `ssh NODE ps` (BatchMode, short connect timeout) when srun cannot."""


@dataclass
class ClusterState:
    report: SlurmReport
    nodes: list[NodeProcesses] | None = None
    notes: list[str] = field(default_factory=list)

    def states(self) -> dict[str, str]:
        return {job.job_id: job.state or "UNKNOWN" for job in self.report.jobs}


class ClusterProbe(Protocol):
    def probe(self, run_dir: Path) -> ClusterState | None:
        """The run's SLURM jobs and node processes; None when the run has nothing of SLURM."""
        ...


def _which(name: str, env: Mapping[str, str] | None) -> str | None:
    path = (env if env is not None else os.environ).get("PATH")
    return shutil.which(name, path=path)


def _configured(env: Mapping[str, str] | None) -> bool:
    source = env if env is not None else os.environ
    return bool(source.get("SLURM_CONF")) or Path("/etc/slurm/slurm.conf").exists() or Path("/etc/slurm-llnl/slurm.conf").exists()


def probe_cluster(run_dir: Path, settings: SlurmSettings = SlurmSettings()) -> ClusterState | None:
    run_dir = Path(os.path.abspath(run_dir))
    logs = slurm_jobs.job_ids_from_logs(run_dir)
    scripts = slurm_jobs.find_sbatch_scripts(run_dir)
    has_squeue = _which("squeue", settings.env) is not None
    if not logs and not scripts and not (has_squeue and _configured(settings.env)):
        return None  # nothing says this run is a SLURM job: no probe, no note
    if not has_squeue:
        named = ", ".join(f"job_{j}.log" for j in logs) or "the sbatch script"
        return ClusterState(SlurmReport(), notes=[f"SLURM: squeue is not on PATH; the job(s) of {named} cannot be looked up"])
    report = slurm_jobs.find_run_jobs(run_dir, env=settings.env, timeout=settings.timeout)
    if not report.jobs and not logs and not scripts:
        return None  # squeue answered, nothing of this run in it
    state = ClusterState(report, notes=list(report.notes))
    active = [job for job in report.jobs if job.active]
    if len(active) > 1:
        state.notes.append(
            f"{len(active)} SLURM jobs are active for this run ("
            + ", ".join(f"{j.job_id} {j.state}" for j in active)
            + "): they write the same run dir"
        )
    running = [job for job in active if job.state == "RUNNING"]
    if settings.probe_nodes and running:
        state.nodes, notes = probe_nodes(running[-1], settings)
        state.notes += notes
    return state


class SystemCluster:
    """The real probe, with its settings."""

    def __init__(self, settings: SlurmSettings | None = None) -> None:
        self.settings = settings or SlurmSettings()

    def probe(self, run_dir: Path) -> ClusterState | None:
        return probe_cluster(run_dir, self.settings)


def hostnames(nodes: str, settings: SlurmSettings) -> list[str]:
    """`gpu[01-02],cpu3` -> the host names (scontrol show hostnames), or the list as written."""
    if "[" not in nodes:
        return [n for n in nodes.split(",") if n]
    result = slurm.run_command(["scontrol", "show", "hostnames", nodes], env=settings.env, timeout=settings.timeout)
    names = result.stdout.split() if result.ok else []
    return names or [nodes]


def titles_of(ps_lines: list[str]) -> list[str]:
    """The process titles among `ps -eo args=` lines (a title only: never the arguments)."""
    found = []
    for line in ps_lines:
        words = line.strip().split()
        if words and words[0].startswith(TITLES):
            found.append(words[0])
    return sorted(found)


def probe_nodes(job: SlurmJob, settings: SlurmSettings) -> tuple[list[NodeProcesses] | None, list[str]]:
    """Processes on the job's nodes: srun --overlap first, ssh when configured; (None, a note)
    when neither is possible."""
    names = hostnames(job.nodes or "", settings) if job.nodes else []
    notes: list[str] = []
    if _which("srun", settings.env):
        found, note = _srun(job, names, settings)
        if found is not None:
            return found, notes
        notes.append(note)
    else:
        notes.append("srun is not on PATH")
    if settings.ssh and names:
        return [_ssh(name, settings) for name in names[:MAX_SSH_NODES]], notes
    why = "; ".join(notes)
    return None, [f"processes on the nodes of job {job.job_id} not probed ({why}; ssh not configured)"]


def _srun(job: SlurmJob, names: list[str], settings: SlurmSettings) -> tuple[list[NodeProcesses] | None, str]:
    count = max(1, len(names) or job.node_count or 1)
    argv = [
        "srun", f"--jobid={job.raw_job_id or job.job_id}", "--overlap", f"--nodes={count}", f"--ntasks={count}",
        "--ntasks-per-node=1", "--label", "--quiet", "--mem=0", "--time=1", "ps", "-eo", "args=",
    ]  # fmt: skip
    result = slurm.run_command(argv, env=settings.env, timeout=settings.timeout)
    if not result.ok:
        return None, result.note.replace("srun exited", f"srun --jobid {job.job_id} --overlap exited", 1)
    per_task: dict[int, list[str]] = {}
    for line in result.stdout.splitlines():
        match = _LABEL.match(line)
        if match:
            per_task.setdefault(int(match.group(1)), []).append(match.group(2))
    out = []
    for task in range(count):
        node = names[task] if task < len(names) else f"task {task}"
        if task not in per_task:
            out.append(NodeProcesses(node=node, via="srun", ok=False, note="no answer from this node"))
        else:
            out.append(NodeProcesses(node=node, via="srun", ok=True, titles=titles_of(per_task[task])))
    return out, ""


def _ssh(node: str, settings: SlurmSettings) -> NodeProcesses:
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3", "-o", "StrictHostKeyChecking=yes", node, "ps", "-eo", "args="]
    result = slurm.run_command(argv, env=settings.env, timeout=settings.timeout)
    if not result.ok:
        return NodeProcesses(node=node, via="ssh", ok=False, note=result.note)
    return NodeProcesses(node=node, via="ssh", ok=True, titles=titles_of(result.stdout.splitlines()))
