"""Crash injection: check-ins in child processes that are SIGKILLed at random moments or exactly
around the STATUS.md append, and the invariants STATUS.md and the state store must keep.

Children are forked by a zygote process (this file run as a script) that has already imported
rlagent and holds no thread, lock or connection: a child starts in milliseconds, so hundreds of
kills fit in a test. The zygote talks over its stdin/stdout (no socket: the test suite blocks
the network). A child dies of a real SIGKILL: no exception handler, `finally` or atexit runs,
exactly as when the kernel's OOM killer strikes.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

POINTS = ("before_append", "after_append", "mid_write", "after_checkpoint")
"""Exact kill points: before the append; between the append and the checkpoint; halfway through
the append's write (a torn entry); after the check-in was saved."""

MARKER = re.compile(r"^<!-- rlagent:checkin (?:([0-9a-f]+) )?(\S+)#(\d+) -->$")
CORRECTION = "This entry replaces check-in #"


class Zygote:
    """Forks check-in children on request; `start` returns the child's pid, `wait` its exit code
    (negative: the signal that killed it)."""

    def __init__(self, log: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
        self.log = log
        with open(log, "w") as stderr:  # the children's stderr: a traceback, should one fail
            self.proc = subprocess.Popen(
                [sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env
            )
        assert self._line(60) == "ready", self.tail()

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(line for line in text.splitlines() if "Deserializing unregistered type" not in line)[-4000:]

    def _line(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"the zygote said nothing for {timeout} s"
        return self.proc.stdout.readline().strip()

    def start(self, run_dir: Path, home: Path, point: str | None, checkins: int) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps([str(run_dir), str(home), point, checkins]) + "\n")
        self.proc.stdin.flush()
        return int(self._line(30).removeprefix("pid "))

    def wait(self, timeout: float = 60) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write("wait\n")
        self.proc.stdin.flush()
        return int(self._line(timeout).removeprefix("exit "))

    def run(self, run_dir: Path, home: Path, point: str | None, checkins: int, kill_after: float | None = None) -> int:
        pid = self.start(run_dir, home, point, checkins)
        if kill_after is not None:
            time.sleep(kill_after)
            os.kill(pid, signal.SIGKILL)  # safe even if it is done: unreaped until `wait`, its pid stays its own
        return self.wait()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(30)


def serve() -> None:
    """The zygote's loop (stdin: a JSON request, then `wait`; stdout: `pid N`, then `exit CODE`).
    The child is reaped only on `wait`, so until then its pid cannot be reused by another process."""
    import importlib

    # Imported once, before any fork (the monitor imports the SQLite checkpointer lazily).
    for module in ("langgraph.checkpoint.sqlite", "rlagent.graph.runner", "rlagent.tools.layout", "rlagent.agents.writer"):
        importlib.import_module(module)
    print("ready", flush=True)
    for line in sys.stdin:
        run_dir, home, point, checkins = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                child(run_dir, home, point, checkins)
            except BaseException:
                import traceback

                traceback.print_exc()
                code = 1
            os._exit(code)
        print(f"pid {pid}", flush=True)
        assert sys.stdin.readline().strip() == "wait"
        _, status = os.waitpid(pid, 0)
        print(f"exit {-os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)}", flush=True)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def child(run_dir: str, home: str, point: str | None, checkins: int) -> None:
    """In a forked child: `checkins` offline check-ins of the run; at `point`, SIGKILL itself."""
    import rlagent.tools.statusfile as statusfile
    from rlagent.graph.runner import Monitor
    from rlagent.tools.layout import discover_run

    append = statusfile.append_entry  # what the writer's StatusFile sink appends with
    if point == "before_append":
        statusfile.append_entry = lambda *a, **k: (_die(), append(*a, **k))[1]
    elif point == "after_append":
        statusfile.append_entry = lambda *a, **k: (append(*a, **k), _die())[0]
    elif point == "mid_write":

        def torn(fd: int, data: bytes, size: int) -> None:
            os.write(fd, data[: max(1, len(data) // 2)])
            _die()

        statusfile._write_all = torn
    monitor = Monitor(discover_run(run_dir), home=Path(home), offline=True, lock_timeout_s=60)
    for _ in range(checkins):
        monitor.check_in()
    if point == "after_checkpoint":
        _die()
    monitor.close()


@dataclass
class Entry:
    digest: str
    key: str
    checkin: int
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def parse_status(text: str) -> tuple[list[Entry], list[str]]:
    """The entries in file order, and the lines after the last marker (a half-written entry)."""
    entries: list[Entry] = []
    pending: list[str] = []
    for line in text.splitlines():
        match = MARKER.match(line)
        if match:
            entries.append(Entry(match.group(1) or "", match.group(2), int(match.group(3)), pending))
            pending = []
        else:
            pending.append(line)
    return entries, [line for line in pending if line.strip()]


def integrity(home: Path) -> list[str]:
    """`PRAGMA integrity_check` of every state store under `home` (['ok', ...] when sound)."""
    results = []
    for db in sorted(home.glob("runs/*/state.db")):
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            results.append(conn.execute("PRAGMA integrity_check").fetchone()[0])
        finally:
            conn.close()
    return results


def stored(run_dir: Path, home: Path) -> tuple[int, str]:
    """(the number of the last check-in the state store saved, the home's entry key)."""
    from rlagent.graph.runner import Monitor
    from rlagent.tools.layout import discover_run

    monitor = Monitor(discover_run(run_dir), home=home, offline=True)
    try:
        state = monitor.state()
        return (state.checkin if state else 0), monitor.entry_key
    finally:
        monitor.close()


def entry_problems(entries: list[Entry], tail: list[str], key: str, saved: int) -> list[str]:
    """What breaks STATUS.md's rules for the entries of one state home (`key`): a half-written
    entry, a duplicate, an entry out of order, a check-in saved in the store but missing, a
    second version of an entry that does not say it replaces the first."""
    problems = []
    if tail:
        problems.append(f"half-written entry at the end: {tail[:2]}")
    mine = [e for e in entries if e.key == key]
    seen: set[tuple[str, int]] = set()
    last = -1
    for entry in mine:
        if (entry.digest, entry.checkin) in seen:
            problems.append(f"#{entry.checkin} ({entry.digest}) appended twice")
        if entry.checkin < last:
            problems.append(f"#{entry.checkin} after #{last}: out of order")
        again = entry.checkin > 0 and any(e.checkin == entry.checkin for e in mine[: mine.index(entry)])
        if again and CORRECTION + str(entry.checkin) not in entry.text:
            problems.append(f"#{entry.checkin} appears again without saying it replaces the first")
        headings = [line for line in entry.lines if line.startswith("## ") or line.startswith("# ")]
        if entry.checkin > 0 and len([h for h in headings if h.startswith("## ")]) != 1:
            problems.append(f"#{entry.checkin} is not one whole entry (headings {headings})")
        seen.add((entry.digest, entry.checkin))
        last = max(last, entry.checkin)
    present = {e.checkin for e in mine}
    missing = [n for n in range(1, saved + 1) if n not in present]
    if missing:
        problems.append(f"check-ins saved in the store but not in STATUS.md: {missing}")
    return problems


if __name__ == "__main__":
    serve()
