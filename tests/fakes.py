"""Fakes of rlagent's side-effect interfaces, for tests. Each behaves like the real one in what its
callers rely on (the same return values, the same errors), without touching the host:

FakeClock      tools.clock.Clock               time moves only when slept (or advanced)
MemoryStatus   tools.statusfile.StatusSink     STATUS.md in memory, same marker rule; can fail like a full disk
FakeProcesses  tools.processes.ProcessProbe    the run's processes as the test sets them; a launch command
FakeHost       tools.hostprobes.HostProbe      RAM and free disk
FakeHttp       tools.hostprobes.HttpGet        pages by URL; anything else is unreachable
FakePane       tools.tmux.PaneLike             records what is sent; busy as scripted
FakeTmux       tools.tmux.PaneOpener           one pane, or the TmuxError of a missing server

The LLM client's fake is `tools.llm.client.ScriptedClient`, next to its protocol.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from rlagent.models.actions import LaunchCommand, TmuxTarget
from rlagent.models.observation import ProcessInfo
from rlagent.tools.tmux import TmuxError


class FakeClock:
    """The wall clock and the monotonic clock advance together, by exactly what is slept."""

    def __init__(self, start: datetime, on_sleep: Callable[[FakeClock], None] | None = None) -> None:
        self.start = start
        self.elapsed = 0.0
        self.slept: list[float] = []
        self.on_sleep = on_sleep
        """Called after each sleep: the world changing while the caller waits."""

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.elapsed)

    def monotonic(self) -> float:
        return 1000.0 + self.elapsed

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.elapsed += seconds
        if self.on_sleep is not None:
            self.on_sleep(self)

    def advance(self, seconds: float) -> None:
        self.elapsed += seconds


class MemoryStatus:
    """Entries per run dir, appended unless one with the same marker is there (as the real file)."""

    def __init__(self, fail: OSError | None = None) -> None:
        self.fail = fail
        self.entries: dict[Path, list[str]] = {}

    def append(self, run_dir: Path, text: str, marker: str) -> bool:
        if self.fail is not None:
            raise self.fail
        entries = self.entries.setdefault(Path(run_dir), [])
        if any(marker in entry for entry in entries):
            return False
        entries.append(text)
        return True

    def written_versions(self, run_dir: Path, key: str, checkin: int) -> list[str]:
        wanted = re.compile(rf"^<!-- rlagent:checkin (?:([0-9a-f]+) )?{re.escape(key)}#{checkin} -->$", re.M)
        return [m.group(1) or "" for entry in self.entries.get(Path(run_dir), []) for m in wanted.finditer(entry)]

    def text(self, run_dir: Path) -> str:
        return "\n\n".join(self.entries.get(Path(run_dir), []))


def processes(*roles: str) -> list[ProcessInfo]:
    return [ProcessInfo(pid=4000 + i, title=f"PRIME-RL::{role}", role=role, status="running") for i, role in enumerate(roles)]


class FakeProcesses:
    """The run's processes are `roles` (change it as the run comes and goes); `launch` is what the
    environment of their relatives says; `error` makes the scan fail."""

    def __init__(self, *roles: str, launch: LaunchCommand | None = None, error: OSError | None = None) -> None:
        self.roles = list(roles)
        self.launch = launch
        self.error = error
        self.scans = 0

    def run_processes(self, run_dir: Path, run_name: str) -> tuple[list[ProcessInfo], str]:
        self.scans += 1
        if self.error is not None:
            raise self.error
        if not self.roles:
            return [], "no PRIME-RL::* process on this host"
        return processes(*self.roles), f"matched by environment ({len(self.roles)})"

    def launch_command(self, pids: list[int]) -> LaunchCommand | None:
        return self.launch if self.roles else None


class FakeHost:
    def __init__(self, ram_percent: float = 40.0, disk: tuple[float, float] = (0.5, 100.0), error: OSError | None = None) -> None:
        self.ram, self.disk, self.error = ram_percent, disk, error

    def ram_percent(self) -> float:
        if self.error is not None:
            raise self.error
        return self.ram

    def disk_free(self, path: Path) -> tuple[float, float]:
        if self.error is not None:
            raise self.error
        return self.disk


class FakeHttp:
    """GET answers from `pages` (a body, or an exception to raise); other URLs are refused."""

    def __init__(self, pages: dict[str, str | Exception] | None = None) -> None:
        self.pages = pages or {}
        self.asked: list[str] = []

    def __call__(self, url: str, timeout: float) -> str:
        self.asked.append(url)
        page = self.pages.get(url, ConnectionRefusedError(111, "Connection refused"))
        if isinstance(page, Exception):
            raise page
        return page


class FakePane:
    """`busy` is the foreground command (None: a shell prompt); a list scripts successive answers."""

    def __init__(self, busy: str | list[str | None] | None = None, lines: list[str] | None = None) -> None:
        self.busy = busy
        self.history = lines or []
        self.sent: list[tuple[str, str]] = []

    def busy_with(self) -> str | None:
        if isinstance(self.busy, list):
            return self.busy.pop(0) if len(self.busy) > 1 else self.busy[0]
        return self.busy

    def send_line(self, text: str) -> None:
        self.sent.append(("line", text))

    def send_key(self, key: str) -> None:
        self.sent.append(("key", key))

    def lines(self, history: int = 2000) -> list[str]:
        return self.history[-history:]


class FakeTmux:
    """Opens `pane` for any target, or raises the TmuxError `missing` (no server, session, window)."""

    def __init__(self, pane: FakePane | None = None, missing: str | None = None) -> None:
        self.pane = pane
        self.missing = missing
        self.opened: list[TmuxTarget] = []

    def __call__(self, target: TmuxTarget) -> FakePane:
        self.opened.append(target)
        if self.missing is not None or self.pane is None:
            raise TmuxError(self.missing or "no tmux server")
        return self.pane
