"""What a fleet view needs without LangGraph: finding the runs under roots, reading each run's
saved snapshot, its STATUS.md tail, and writing the HTML report. `status ROOT`, `report`,
`silence` and `ack` use it at interactive speed; the watcher (graph/fleet.py) builds on it."""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from loguru import logger

from rlagent.agents.fleet_report import plots_of, render_report, split_entries
from rlagent.graph.alerts import RETIRED, SNAPSHOT
from rlagent.graph.historyrows import stored_tables
from rlagent.graph.store import run_key
from rlagent.models.fleet import RunSnapshot, RunSummary
from rlagent.models.observation import MetricHistory
from rlagent.models.run import RunInfo
from rlagent.tools import safefs
from rlagent.tools.adapters import run_here
from rlagent.tools.fleetdb import FleetDB
from rlagent.tools.layout import RunNotFound, discover_run

MAX_DIRS = 50_000
"""Folders looked at per root and round, at most (a note says when a root has more)."""
STATUS_TAIL = 256 << 10


# --- discovery -------------------------------------------------------------------------------


def find_runs(
    roots: Iterable[str | os.PathLike], max_depth: int = 3, max_dirs: int = MAX_DIRS
) -> tuple[list[RunInfo], list[str]]:
    """Every run under the roots (a root may itself be a run), and notes on what could not be read."""
    runs: dict[str, RunInfo] = {}
    notes: list[str] = []
    for given in roots:
        root = Path(given).expanduser()
        if problem := safefs.not_a_directory(root):
            notes.append(f"{root}: {problem}")
            continue
        seen: set[str] = set()
        stack: list[tuple[Path, int]] = [(root, 0)]
        while stack:
            folder, depth = stack.pop()
            real = os.path.realpath(folder)
            if real in seen:
                continue
            seen.add(real)
            if len(seen) > max_dirs:
                notes.append(f"{root}: stopped looking after {max_dirs} folders (use a narrower root or --max-depth)")
                break
            try:
                info = discover_run(folder)
            except RunNotFound:
                info = None
            except OSError as exc:
                notes.append(f"{folder}: cannot be read ({exc.strerror or exc})")
                continue
            if info is None or info.picked_from is not None:
                info = run_here(folder) or info  # a verl, TRL or OpenRLHF run
            if info is not None and info.picked_from is None:
                runs.setdefault(info.run_dir, info)
                continue
            if depth >= max_depth:
                continue
            try:
                with os.scandir(folder) as entries:
                    children = sorted(e.path for e in entries if not e.name.startswith(".") and _is_dir(e))
            except OSError as exc:
                notes.append(f"{folder}: cannot be listed ({exc.strerror or exc})")
                continue
            stack.extend((Path(c), depth + 1) for c in reversed(children))
    return sorted(runs.values(), key=lambda r: r.run_dir), notes


def _is_dir(entry: os.DirEntry) -> bool:
    """A folder to look into; a symlink loop or a link that cannot be followed is not one (and
    must not stop the listing of its siblings)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def activity_time(run_dir: str) -> float:
    """Newest modification time of the run dir and the files a few levels under it (not its
    checkpoints or rollouts, which are large trees that move only with the logs)."""
    newest = 0.0
    stack = [(run_dir, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    newest = max(newest, st.st_mtime)
                    if (
                        depth < 2
                        and entry.is_dir(follow_symlinks=True)
                        and entry.name not in ("checkpoints", "rollouts", "weights")
                    ):
                        stack.append((entry.path, depth + 1))
        except OSError:
            continue
    return newest


def state_db_path(home: Path, run_dir: str) -> Path:
    return Path(home) / "runs" / run_key(run_dir) / "state.db"


def read_snapshot(home: Path, run_dir: str, *, plots: bool = False) -> tuple[RunSnapshot | None, RunSummary | None]:
    """The run's last snapshot and its retirement record, from its store (None when never checked,
    or when the store cannot be read: the check-in that uses it says why). With `plots`, the
    snapshot's plots are drawn from the history rows the same check-in stored."""
    try:
        db = FleetDB.open(state_db_path(home, run_dir), create=False)
    except (OSError, sqlite3.Error) as exc:
        logger.debug("state store of {} unreadable: {}", run_dir, exc)
        return None, None
    if db is None:
        return None, None
    try:
        with db.conn:  # one read transaction: the snapshot and the rows of the same check-in
            db.conn.execute("BEGIN")
            body, retired = db.get(SNAPSHOT), db.get(RETIRED)
            tables = stored_tables(db.conn, run_key(run_dir)) if plots and body else None
        snapshot = RunSnapshot.model_validate_json(body) if body else None
        if snapshot is not None and tables is not None:
            snapshot.plots = plots_of(MetricHistory(trainer=tables["trainer"], orchestrator=tables["orchestrator"]))
        return snapshot, RunSummary.model_validate_json(retired) if retired else None
    except (sqlite3.Error, ValueError) as exc:
        logger.debug("state store of {} unreadable: {}", run_dir, exc)
        return None, None
    finally:
        db.close()


def status_entries(run_dir: str, limit: int) -> list[str]:
    """The newest `limit` entries of the run's STATUS.md (read from its tail)."""
    if limit <= 0:
        return []
    path = Path(run_dir) / "STATUS.md"
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - STATUS_TAIL))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    if size > STATUS_TAIL:
        text = text[text.find("\n## ") + 1 :] if "\n## " in text else ""
    return split_entries(text, limit)


def not_replaceable(path: Path) -> str | None:
    """Why the report must not take the place of what is at `path`, or None. A report is written
    beside it and renamed over it, which would put an HTML file where a device was (`/dev/null`,
    `/dev/full`: as root, the device node itself), or leave a reader of a FIFO waiting. A missing
    path is created; a regular file, or a symlink (the link, never what it points to), replaced."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None  # missing, or not looked at: writing it will say why if it cannot be written
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return None
    return f"{safefs.kind_of(mode)}, not a file: not replaced"


def write_report(
    path: Path, snapshots: Sequence[RunSnapshot], *, title: str, entries: int, notes: Sequence[str] = (), subtitle: str = ""
) -> float:
    """Render and atomically replace the report; seconds it took."""
    started = time.perf_counter()
    html = render_report(
        snapshots,
        title=title,
        entries={s.summary.run_dir: status_entries(s.summary.run_dir, entries) for s in snapshots},
        notes=notes,
        subtitle=subtitle,
    )
    path = Path(path)
    if (why := not_replaceable(path)) is not None:
        raise safefs.UnsafeFile(path, why)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, path)
    return time.perf_counter() - started
