"""Where a run's state lives: `$RLAGENT_HOME/runs/<name>-<hash>/state.db`, one SQLite file per run.

Not inside the run dir: run dirs are often on shared filesystems where SQLite locking is
unreliable, fixtures (simulated runs) must stay untouched by replays, and a user may watch a run they
cannot write to. One database per run (keyed by the run dir's real path) means two monitors
on two runs never share a file; a lock file serialises two monitors on the same run.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import hashlib
import json
import os
import re
import secrets
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import ParamSpec, TypeVar

from loguru import logger

KEEP_CHECKPOINTS = 8
LOCK_TIMEOUT_S = 60.0
"""How long a check-in waits for another one on the same run before giving up."""
STORE_ID_FILE = "store-id"


class StoreError(Exception):
    """The state store cannot be used (a full disk, an I/O error); the message is one clear line."""


class RunLocked(Exception):
    """Another rlagent held the run's lock for longer than the wait allowed; one clear line."""


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


def store_id(directory: Path) -> str:
    """A random id made once per state store: with the run key it names this home's STATUS.md
    entries, so a second home (another machine, a wiped state dir) never reuses their ids."""
    path = directory / STORE_ID_FILE
    existing = _read_id(path)
    if existing:
        return existing
    value = secrets.token_hex(4)
    tmp = directory / f".{STORE_ID_FILE}.{os.getpid()}"
    tmp.write_text(value + "\n", encoding="ascii")
    try:
        os.link(tmp, path)  # the first of two monitors starting at once wins
    except FileExistsError:
        existing = _read_id(path)
        if existing:
            return existing
        os.replace(tmp, path)  # a damaged id file: replaced
    finally:
        tmp.unlink(missing_ok=True)
    return value


def _read_id(path: Path) -> str | None:
    try:
        value = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return value if re.fullmatch(r"[0-9a-f]{8}", value) else None


P = ParamSpec("P")
R = TypeVar("R")


def store_errors(method: Callable[P, R]) -> Callable[P, R]:
    """A method of an object with `.dir` (its state dir): SQLite errors become one StoreError line."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except sqlite3.Error as exc:
            where = getattr(args[0], "dir", None) if args else None
            hint = "; is its filesystem full or failing?" if "disk" in str(exc) or "full" in str(exc) else ""
            raise StoreError(f"state store {where or '(rlagent home)'}/state.db: {exc}{hint}") from exc

    return wrapper


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
def run_lock(directory: Path, timeout_s: float = LOCK_TIMEOUT_S, doing: str = "a check-in") -> Iterator[None]:
    """Exclusive per-run lock held for the length of one check-in.

    While another process holds it, says once who (pid, host, since when, doing what) and waits
    at most `timeout_s`, then raises RunLocked."""
    fd = os.open(directory / "monitor.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        _acquire(fd, timeout_s)
        _stamp(fd, doing)
        yield
    finally:
        os.close(fd)


def _acquire(fd: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
        if time.monotonic() >= deadline:
            raise RunLocked(
                f"another rlagent is busy with this run ({_holder(fd)}); gave up after {timeout_s:.0f} s: try again later"
            )
        if not told:
            logger.warning("waiting up to {:.0f} s for another rlagent on this run: {}", timeout_s, _holder(fd))
            told = True
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def _stamp(fd: int, doing: str) -> None:
    """Who holds the lock, for whoever waits for it (best effort: a full disk may refuse it)."""
    since = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": since, "doing": doing}).encode()
    try:
        os.pwrite(fd, record, 0)  # in place: truncating first cost 0.3 ms a check-in (a journalled block freed and taken again)
        if os.fstat(fd).st_size != len(record):
            os.ftruncate(fd, len(record))  # an earlier holder's longer record: its tail goes
    except OSError:
        pass


def _holder(fd: int) -> str:
    try:
        record = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {record['pid']} on {record['host']}, {record['doing']} since {record['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that did not say who it is"
