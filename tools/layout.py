"""Find the run and its files, in either prime-rl layout (prime-rl-formats.md section 3)."""

from __future__ import annotations

import os
from pathlib import Path

from rlagent.models.run import Layout, RunInfo
from rlagent.tools.safefs import check_inside, is_file, list_dir, not_a_directory, reason


class RunNotFound(Exception):
    """The path is not a prime-rl run directory, nor an output directory holding one."""


def _looks_like_run(path: Path) -> Layout | None:
    configs, logs = path / "configs", path / "logs"
    try:
        if (logs / "latest").is_symlink() or any(logs.glob("attempt_*")) or any(configs.glob("*.json")):
            return Layout.H
        if any(configs.glob("*.toml")) or any(logs.glob("*.log")) or (path / "run_default").is_dir():
            return Layout.L
    except OSError:  # an unreadable logs/ or configs/: judged by what else is there
        names = {p.name for p in list_dir(path)}
        if "configs" in names or "logs" in names:
            return Layout.L if "run_default" in names else Layout.H
    return None


def discover_run(path: str | os.PathLike) -> RunInfo:
    """RunInfo for `path`, or for its newest run when `path` is an output dir of several runs."""
    root = Path(path).expanduser()
    problem = not_a_directory(root)
    if problem:
        raise RunNotFound(f"{root}: {problem}")
    root = root.resolve()
    layout = _looks_like_run(root)
    if layout is not None:
        return RunInfo(run_dir=str(root), layout=layout, name=root.name)
    try:
        children = [c for c in root.iterdir() if c.is_dir() and not c.name.startswith(".")]
    except PermissionError as exc:
        raise RunNotFound(f"{root}: cannot list it ({exc.strerror})") from exc
    runs = [(c, lay) for c in children if (lay := _looks_like_run(c)) is not None]
    if not runs:
        raise RunNotFound(f"{root}: not a prime-rl run ({_what_is_missing(root)}) and holds no run directory")
    newest, lay = max(runs, key=lambda item: _activity_time(item[0]))
    return RunInfo(run_dir=str(newest), layout=lay, name=newest.name, picked_from=str(root))


def _what_is_missing(root: Path) -> str:
    """Why `root` is not a run, in the words of what is (not) there."""
    configs, logs = root / "configs", root / "logs"
    if not configs.is_dir() and not logs.is_dir():
        return "no configs/ or logs/"
    parts = []
    if configs.is_dir():
        parts.append("configs/ holds no *.json or *.toml")
    if logs.is_dir():
        parts.append("logs/ holds no latest, attempt_N or *.log yet")
    return "; ".join(parts)


def _activity_time(run: Path) -> float:
    """Newest mtime among the run's logs (or the dir itself): the run written to last."""
    times = [run.stat().st_mtime]
    for log in log_files(run, Layout.H) + log_files(run, Layout.L):
        try:
            times.append(log.stat().st_mtime)
        except OSError:
            continue
    return max(times)


def current_attempt(run_dir: Path, notes: list[str] | None = None) -> str | None:
    """H: the attempt `logs/latest` points to now (re-resolved every check-in).

    A `latest` that loops or leads out of `logs/` is a note, and the newest `attempt_N` is read
    instead; one that points to nothing (yet) is no attempt, as before."""
    logs = run_dir / "logs"
    latest = logs / "latest"
    entries = list_dir(logs, notes, run_dir)
    if latest in entries:
        try:
            return check_inside(latest, logs).name
        except FileNotFoundError:
            return None
        except OSError as exc:
            note = f"logs/latest cannot be followed ({reason(exc)}); reading the newest logs/attempt_N"
            if notes is not None and note not in notes:  # asked twice per check-in (attempt, then files)
                notes.append(note)
    attempts = sorted((p for p in entries if p.name.startswith("attempt_")), key=lambda p: _attempt_number(p.name))
    return attempts[-1].name if attempts else None


def _attempt_number(name: str) -> int:
    tail = name.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def log_files(run_dir: Path, layout: Layout, notes: list[str] | None = None) -> list[Path]:
    """The log files a check-in reads, with resolved (symlink-free) attempt paths for H.

    An unreadable log directory, or a log file that cannot be looked at, is one of `notes`."""
    files: list[Path] = []
    if layout is Layout.H:
        attempt = current_attempt(run_dir, notes)
        if attempt is None:
            return sorted(run_dir.glob("job_*.log"))
        base = run_dir / "logs" / attempt
        names = ("trainer.log", "orchestrator.log", "inference.log", "evals.log")
        envs = "envs/*/*.log"
    else:
        base = run_dir / "logs"
        names = ("trainer.log", "orchestrator.log", "inference.log")
        envs = "envs/*/*/*.log"
    present = {p.name for p in list_dir(base, notes, run_dir)}
    files += [base / name for name in names if name in present]
    files += sorted(base.glob(envs))
    if layout is Layout.L:
        files += sorted(base.glob("envs/*/*.log"))
    files += sorted(run_dir.glob("job_*.log"))
    return [f for f in files if is_file(f, notes, run_dir)]


def process_of(relative_path: str) -> str | None:
    """Which process writes a log file: it decides whose step line a line is when labels don't."""
    name = Path(relative_path).name
    if name.startswith("trainer") or "/trainer/" in relative_path:
        return "trainer"
    if name.startswith("orchestrator"):
        return "orchestrator"
    return None
