"""SIMULATED framework runs: the event model every writer produces, and the formatting they share.

An attempt (one launch) is a list of `Item`s: bytes appended to a file, a whole file put, or a path
removed, each at a simulated time and owned by the process that writes it (`driver`, `taskrunner`,
`worker3`, `rank0`, ...). The offline writer applies them in time order and sets every file's mtime to
the time of its last write; the live runner has each process write its own items when the clock reaches
them. Console helpers reproduce Ray's worker prefix (with colorama's codes), its dedup suffix, tqdm's
meter (`tqdm.format_meter`, re-implemented: tqdm is not a dependency) and its postfix numbers.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..clock import Clock

DIM_CYAN = "\x1b[2m\x1b[36m"
RESET = "\x1b[0m"
DEDUP_NOTE = (
    "(Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
    "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html#log-deduplication for more options.)"
)
PLACEHOLDER = b"SIMULATED by rlagent: placeholder for a binary checkpoint file\n"
SIDE_CAR = "writes.json"
"""A fixture's record of when each file grew (the console logs of these frameworks carry no times)."""


@dataclass(frozen=True, slots=True)
class Item:
    t: float
    """Simulated seconds since the attempt's launch."""
    owner: str
    """The process that writes it."""
    path: str
    """Relative to the run (launch) directory."""
    data: bytes = b""
    op: str = "append"
    """`append`, `put` (the whole file, atomically) or `remove` (a file or a directory)."""


@dataclass
class Plan:
    """One attempt: what every process writes, and how the launch ends."""

    items: list[Item] = field(default_factory=list)
    step_times: dict[int, float] = field(default_factory=dict)
    """Step -> simulated time its metrics line was written."""
    end: float = 0.0
    """When the last process exits (or the recording is cut)."""
    exit_code: int | None = None
    """The launch command's exit status; None while it still runs at the end of the recording."""
    failing: str | None = None
    """The process that dies first (its own exit code in `failing_code`)."""
    failing_code: int = 0
    fail_time: float = math.inf
    roles: dict[str, str] = field(default_factory=dict)
    """Process role -> its title / command line (live mode)."""
    parent: str = "driver"
    """The role of the launch command itself."""
    rows: list[tuple[int, str, dict[str, float | None]]] = field(default_factory=list)
    """(step, `train`|`val`, the values as logged) of every metrics line, in order: what a parser must read."""

    def add(self, t: float, owner: str, path: str, data: bytes | str = b"", op: str = "append") -> None:
        self.items.append(Item(t, owner, path, data.encode() if isinstance(data, str) else data, op))

    def ordered(self) -> list[Item]:
        return sorted(self.items, key=lambda item: item.t)  # stable: same-time items keep their order


# ---- console formatting ----------------------------------------------------------------------------


def ray_prefix(actor: str, pid: int, ansi: bool, ip: str | None = None) -> str:
    """Ray's `print_worker_logs` prefix: `(TaskRunner pid=42)` (`, ip=...` for another node), dim cyan."""
    where = f"pid={pid}" + (f", ip={ip}" if ip else "")
    label = f"({actor} {where})" if actor else f"({where})"
    return f"{DIM_CYAN}{label}{RESET} " if ansi else f"{label} "


def ray_lines(text: str, actor: str, pid: int, ansi: bool, ip: str | None = None, repeated: int = 0) -> str:
    """Every line of `text` with the worker prefix; `repeated` > 1 adds the dedup suffix to the last."""
    prefix = ray_prefix(actor, pid, ansi, ip)
    lines = text.split("\n")
    out = [f"{prefix}{line}" for line in lines]
    if repeated > 1:
        out[-1] += f" [repeated {repeated}x across cluster]"
    return "\n".join(out) + "\n"


def format_interval(seconds: float) -> str:
    """tqdm.format_interval."""
    mins, s = divmod(int(seconds), 60)
    h, m = divmod(mins, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


_BAR = " " + "".join(map(chr, range(0x258F, 0x2587, -1)))  # tqdm's UTF charset " ▏▎▍▌▋▊▉█"


def tqdm_meter(n: int, total: int | None, elapsed: float, desc: str = "", rate: float | None = None, postfix: str = "") -> str:
    """tqdm.format_meter for a non-terminal (ncols unknown: a 10-character bar), unit `it`."""
    if rate is None and elapsed > 0 and n > 0:
        rate = n / elapsed
    inv = 1 / rate if rate else None
    rate_fmt = (f"{inv:5.2f}s/it" if inv and inv > 1 else f"{rate:5.2f}it/s") if rate else "?it/s"
    post = f", {postfix}" if postfix else ""
    prefix = f"{desc}: " if desc else ""
    if not total:
        return f"{prefix}{n}it [{format_interval(elapsed)}, {rate_fmt}{post}]"
    frac = min(1.0, n / total)
    full, part = divmod(int(frac * 10 * 8), 8)
    bar = _BAR[-1] * full
    if full < 10:
        bar += _BAR[part] + _BAR[0] * (10 - full - 1)
    remaining = format_interval((total - n) / rate) if rate else "?"
    return f"{prefix}{frac * 100:3.0f}%|{bar}| {n}/{total} [{format_interval(elapsed)}<{remaining}, {rate_fmt}{post}]"


def format_num(value: float) -> str:
    """tqdm.format_num (what `set_postfix` shows for a number)."""
    f = f"{value:.3g}".replace("+0", "+").replace("-0", "-")
    n = str(value)
    return f if len(f) < len(n) else n


def postfix(items: Iterable[tuple[str, float]]) -> str:
    return ", ".join(f"{key}={format_num(value)}" for key, value in items)


def py_repr(value: object) -> str:
    """Python's repr of a logged value (floats print `nan`/`inf` bare, as in the real logs)."""
    return repr(value)


def py_dict(items: Iterable[tuple[str, object]]) -> str:
    """`str(dict)` of the items, in their order."""
    return "{" + ", ".join(f"{key!r}: {py_repr(value)}" for key, value in items) + "}"


def clock_for(start, rate: float = 1.0) -> Clock:
    return Clock(start, "UTC", rate)


# ---- the offline writer -------------------------------------------------------------------------


@dataclass
class Growth:
    """What a fixture needs to replay files that carry no times: every file's size after each write,
    the earlier contents of small files that are rewritten, and the paths removed."""

    appends: dict[str, list[list[float]]] = field(default_factory=dict)
    puts: dict[str, list[list]] = field(default_factory=dict)
    removed: dict[str, list[float]] = field(default_factory=dict)
    steps: dict[str, float] = field(default_factory=dict)
    attempts: list[dict] = field(default_factory=list)

    def dumps(self, framework: str) -> str:
        data = {
            "version": 1,
            "simulated": True,
            "framework": framework,
            "attempts": self.attempts,
            "steps": self.steps,
            "appends": dict(sorted(self.appends.items())),
            # a file put once needs no history: its mtime (manifest.json) says when it appeared
            "puts": dict(sorted((path, history) for path, history in self.puts.items() if len(history) > 1)),
            "removed": dict(sorted(self.removed.items())),
        }
        return json.dumps(data, indent=1) + "\n"


def _epoch(clock: Clock, t: float) -> float:
    return round(clock.epoch(t), 3)


def apply_plan(plan: Plan, root: Path, clock: Clock, growth: Growth | None = None, cut: float = math.inf) -> None:
    """Write an attempt's items (up to simulated time `cut`) into `root`; mtimes = simulated times."""
    newest: dict[Path, float] = {}
    for item in plan.ordered():
        if item.t > cut:
            break
        path = root / item.path
        when = _epoch(clock, item.t)
        if item.op == "remove":
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
            for gone in [p for p in newest if p == path or path in p.parents]:
                del newest[gone]
            if growth is not None:
                growth.removed.setdefault(item.path, []).append(when)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if item.op == "put":
            path.write_bytes(item.data)
            if growth is not None and len(item.data) <= 4096:
                growth.puts.setdefault(item.path, []).append([when, item.data.decode("utf-8", "replace")])
        else:
            with open(path, "ab") as handle:
                handle.write(item.data)
            if growth is not None:
                sizes = growth.appends.setdefault(item.path, [])
                size = path.stat().st_size
                if sizes and sizes[-1][1] == when:
                    sizes[-1][0] = size
                else:
                    sizes.append([size, when])
        newest[path] = when
    for path, when in newest.items():
        if path.exists():
            os.utime(path, (when, when))
    if growth is not None:
        for n, t in plan.step_times.items():
            if t <= cut:
                growth.steps[str(n)] = _epoch(clock, t)
