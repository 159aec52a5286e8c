"""Where a run's state lives: `$RLAGENT_HOME/runs/<name>-<hash>/state.db`, one SQLite file per run.

Not inside the run dir: run dirs are often on shared filesystems where SQLite locking is
unreliable, fixtures (simulated runs) must stay untouched by replays, and a user may watch a run they
cannot write to. One database per run (keyed by the run dir's real path) means two monitors
on two runs never share a file; a lock file serialises two monitors on the same run.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

KEEP_CHECKPOINTS = 8


def default_home() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "rlagent"


def run_key(run_dir: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(run_dir).name)[:60] or "run"
    digest = hashlib.sha256(os.path.realpath(run_dir).encode()).hexdigest()[:12]
    return f"{name}-{digest}"


def state_dir(home: Path, key: str) -> Path:
    path = home / "runs" / key
    path.mkdir(parents=True, exist_ok=True)
    return path


def connect(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db_path, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    # WAL + NORMAL survives a crash of rlagent; only a power cut can lose the last check-in,
    # which the entry ids in STATUS.md make safe to redo.
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def prune_checkpoints(conn: sqlite3.Connection, thread_id: str, keep: int = KEEP_CHECKPOINTS) -> None:
    """Keep the newest `keep` checkpoints of a thread (SqliteSaver.prune is not implemented)."""
    for table in ("checkpoints", "writes"):
        conn.execute(
            f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id NOT IN ("
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id DESC LIMIT ?)",
            (thread_id, thread_id, keep),
        )
    conn.commit()


@contextmanager
def run_lock(directory: Path) -> Iterator[None]:
    """Exclusive per-run lock held for the length of one check-in."""
    fd = os.open(directory / "monitor.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
