"""The live processes of a verl, TRL or OpenRLHF run, and how each is tied to the run.

Candidates are read from /proc: Ray actors (`ray::TaskRunner.run`, `ray::WorkerDict`,
`ray::PPOTrainer.fit`, `ray::PolicyModelActor`, `ray::RolloutRayActor`, ...; Ray retitles its workers
so), the framework drivers (`python -m verl.trainer.main_ppo`, `python -m openrlhf.cli.train_ppo_ray`),
torchrun/accelerate launchers and their ranks, and vLLM servers. A candidate belongs to this run when
its working directory is the run dir, it holds a file open under it, its command line names the run's
output dir or experiment (`markers`), or it is in the process tree of one that does. The answer says
which of these tied each process.
"""

from __future__ import annotations

import os
import re

import psutil

from rlagent.models.observation import ProcessInfo

_CANDIDATE = re.compile(
    rb"^ray::|verl\.trainer\.main_|openrlhf\.cli\.|accelerate(?:\s|\x00|$)|/accelerate\x00|torchrun|torch\.distributed\.run|"
    rb"train_grpo|\btrl\x00|vllm\.entrypoints|vllm\x00serve|vllm-serve"
)
_MAX_CMDLINE = 4096


def _candidates() -> dict[int, str]:
    found: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                raw = handle.read(_MAX_CMDLINE)
        except OSError:
            continue
        if raw and _CANDIDATE.search(raw):
            found[int(entry.name)] = raw.replace(b"\x00", b" ").decode("utf-8", "replace").strip()
    return found


def role_of(cmdline: str) -> str:
    """`TaskRunner`, `WorkerDict`, `PPOTrainer`, ... for Ray actors; `driver`, `launcher`, `rank`,
    `vllm` for the others."""
    if cmdline.startswith("ray::"):
        return cmdline[len("ray::") :].split()[0].split(".")[0] or "ray"
    if "vllm" in cmdline and ("serve" in cmdline or "entrypoints" in cmdline):
        return "vLLM"
    if "verl.trainer.main_" in cmdline or "openrlhf.cli." in cmdline:
        return "driver"
    if "accelerate" in cmdline.split()[0:3].__str__() or "torchrun" in cmdline or "torch.distributed.run" in cmdline:
        return "launcher"
    return "rank"


def _tie(proc: psutil.Process, prefix: str, markers: list[str], cmdline: str) -> str | None:
    try:
        if (proc.cwd().rstrip("/") + "/") == prefix:
            return "working directory"
    except (psutil.Error, OSError):
        pass
    try:
        if any(f.path.startswith(prefix) for f in proc.open_files()):
            return "open files"
    except (psutil.Error, OSError):
        pass
    if any(marker and marker in cmdline for marker in markers):
        return "command line"
    return None


def find_framework_processes(run_dir: str, markers: list[str], framework: str) -> tuple[list[ProcessInfo], str]:
    """(this run's processes, how they were tied to it)."""
    candidates = _candidates()
    if not candidates:
        return [], f"no {framework} process (Ray actor, driver, torchrun/accelerate, vLLM) on this host"
    prefix = run_dir.rstrip("/") + "/"
    matched: dict[int, str] = {}
    for pid, cmdline in candidates.items():
        try:
            how = _tie(psutil.Process(pid), prefix, markers, cmdline)
        except psutil.Error:
            continue
        if how:
            matched[pid] = how
    for pid in candidates:
        if pid in matched:
            continue
        try:
            proc = psutil.Process(pid)
            kin = {p.pid for p in proc.parents()} | {c.pid for c in proc.children(True)}
        except psutil.Error:
            continue
        if kin & matched.keys():
            matched[pid] = "process tree"
    if not matched:
        return [], f"{len(candidates)} Ray/torchrun/vLLM process(es) on this host, none tied to this run"
    counts: dict[str, int] = {}
    out = []
    for pid in sorted(matched):
        try:
            proc = psutil.Process(pid)
            status, rss = proc.status(), proc.memory_info().rss / 2**20
        except psutil.Error:
            continue
        if status == psutil.STATUS_ZOMBIE:
            continue
        counts[matched[pid]] = counts.get(matched[pid], 0) + 1
        title = candidates[pid][:200]
        out.append(ProcessInfo(pid=pid, title=title, role=role_of(title), status=status, rss_mb=round(rss, 1)))
    how = "matched by " + ", ".join(f"{method} ({n})" for method, n in counts.items())
    return out, how
