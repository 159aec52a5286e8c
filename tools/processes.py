"""Find the `PRIME-RL::*` processes of one run.

setproctitle overwrites argv, so the title is in /proc/PID/cmdline; it also zeroes
/proc/PID/environ (verified with setproctitle 1.3.8), so a titled process never shows its own
environment. Several runs can share a host, so each process is tied to THIS run by: the
environment of it or of an untitled ancestor (torchrun holds `PRL_RUN_NAME` / `WANDB_ARGS` for
the Trainer), a file it holds open under the run dir (its log), its working directory, or kinship
with a process already matched. What was used is reported in words.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

import psutil

from rlagent.models.actions import LaunchCommand
from rlagent.models.observation import ProcessInfo
from rlagent.tools.launch_source import from_processes

TITLE_PREFIXES = (b"PRIME-RL::", b"Verifiers::")


def _titled_pids() -> dict[int, str]:
    """PIDs whose title is a prime-rl one; reads /proc directly (psutil per PID is ~20x slower)."""
    found: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                head = f.read(128)
        except OSError:
            continue
        if head.startswith(TITLE_PREFIXES):
            found[int(entry.name)] = head.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
    return found


def _environment_names_run(env: dict[str, str], run_dir: str, run_name: str) -> bool:
    if env.get("PRL_RUN_NAME") == run_name:
        return True
    wandb_args = env.get("WANDB_ARGS", "")
    return bool(wandb_args) and (run_dir in wandb_args or f'"{run_name}"' in wandb_args)


def _tied_by_environment(proc: psutil.Process, run_dir: str, run_name: str) -> bool:
    """Its own environment, else that of its nearest ancestors (up to the first shell)."""
    for candidate in [proc, *proc.parents()[:3]]:
        if candidate.pid <= 1:
            break
        try:
            env = candidate.environ()
        except psutil.Error:
            continue
        if env:
            return _environment_names_run(env, run_dir, run_name)
    return False


def _tied_by_files(proc: psutil.Process, run_dir: str) -> bool:
    prefix = run_dir.rstrip("/") + "/"
    try:
        if proc.cwd().rstrip("/") + "/" == prefix:
            return True
    except (psutil.Error, OSError):
        pass
    return any(f.path.startswith(prefix) for f in proc.open_files())


def _writes_elsewhere(proc: psutil.Process, run_dir: str, run_name: str) -> bool:
    """It holds files open in another directory named like this run: a same-named run elsewhere."""
    ours = run_dir.rstrip("/") + "/"
    marker = f"/{run_name}/"
    try:
        return any(marker in f.path and not f.path.startswith(ours) for f in proc.open_files())
    except (psutil.Error, OSError):
        return False


def find_run_processes(run_dir: Path, run_name: str) -> tuple[list[ProcessInfo], str]:
    """(this run's processes, how they were matched)."""
    titled = _titled_pids()
    if not titled:
        return [], "no PRIME-RL::* process on this host"
    run_path = str(run_dir)
    matched: dict[int, str] = {}
    unknown: list[int] = []
    for pid in titled:
        try:
            proc = psutil.Process(pid)
            if _tied_by_files(proc, run_path):
                matched[pid] = "open files"
            elif _tied_by_environment(proc, run_path, run_name) and not _writes_elsewhere(proc, run_path, run_name):
                matched[pid] = "environment"
        except psutil.AccessDenied:
            unknown.append(pid)
        except psutil.NoSuchProcess:
            continue
    # Children and parents of matched processes belong to the same run (torchrun trees, env servers).
    for pid in list(titled):
        if pid in matched:
            continue
        try:
            lineage = {p.pid for p in psutil.Process(pid).parents()} | {c.pid for c in psutil.Process(pid).children(True)}
        except psutil.Error:
            continue
        if lineage & matched.keys():
            matched[pid] = "process tree"
    how: str
    if matched:
        counts: dict[str, int] = {}
        for method in matched.values():
            counts[method] = counts.get(method, 0) + 1
        how = "matched by " + ", ".join(f"{method} ({n})" for method, n in counts.items())
    elif unknown and len(unknown) == len(titled):
        matched = dict.fromkeys(titled, "assumed")
        how = "not permitted to read their environment; assumed the host's only prime-rl processes are this run's"
    else:
        return [], f"{len(titled)} PRIME-RL::* process(es) on this host, none tied to this run"
    out = []
    for pid in sorted(matched):
        title = titled[pid]
        try:
            proc = psutil.Process(pid)
            status, rss = proc.status(), proc.memory_info().rss / 2**20
        except psutil.Error:
            continue
        if status == psutil.STATUS_ZOMBIE:
            continue
        out.append(ProcessInfo(pid=pid, title=title, role=title.split("::", 1)[-1], status=status, rss_mb=round(rss, 1)))
    return out, how


class ProcessProbe(Protocol):
    """What rlagent asks of the host's process table (the collector, the launch-command search
    and the launcher's verification); tests pass a fake (tests/fakes.py)."""

    def run_processes(self, run_dir: Path, run_name: str) -> tuple[list[ProcessInfo], str]:
        """(this run's processes, how they were matched, in words)."""
        ...

    def launch_command(self, pids: list[int]) -> LaunchCommand | None:
        """The run's launch command from the environment of these processes' relatives."""
        ...


class SystemProcesses:
    """The real probe: /proc and psutil."""

    def run_processes(
        self, run_dir: Path, run_name: str, framework: str = "prime-rl", markers: list[str] | None = None
    ) -> tuple[list[ProcessInfo], str]:
        if framework != "prime-rl":
            from rlagent.tools.framework_processes import find_framework_processes

            return find_framework_processes(str(run_dir), markers or [str(run_dir)], framework)
        return find_run_processes(run_dir, run_name)

    def launch_command(self, pids: list[int]) -> LaunchCommand | None:
        return from_processes(pids)
