"""The multi-node log tree of a prime-rl run (monitor-run runbook, docs/training.md):

    logs/[attempt_N/]trainer/node_<k>.log                         per-node trainer stdout
    logs/[attempt_N/]trainer/torchrun/<rdzv>/attempt_<a>/<r>/{stdout,stderr}.log   per-rank
    logs/[attempt_N/]inference/node_<k>.log, inference/router_<i>.log

beside the rank-0 logs (`trainer.log -> trainer/node_0.log` on multi-node) that the main reader
reads. Each file is read incrementally from its cursor like the others, and bounded: at most
MAX_FILES files, at most PER_FILE_BYTES new bytes of one file per check-in (a file that grew more
is read from its tail, with a note) and TOTAL_BYTES in all. What comes out: per file its newest
step and the time of its newest dated line (for a node that went silent), error records as
`rank_error` events (the exception line of a traceback, ERROR lines, NCCL/CUDA failures) and
torchrun's `Root Cause (first observed failure)` block as a `root_cause` event.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path
from typing import NamedTuple

from rlagent.models.cluster import MultiNodeView, Role, TreeFile
from rlagent.models.observation import FileCursor, LogEvent
from rlagent.models.run import Layout
from rlagent.tools.dayclock import date_points
from rlagent.tools.layout import current_attempt
from rlagent.tools.loglines import clean, parse_head
from rlagent.tools.safefs import open_regular
from rlagent.tools.steplines import parse_step_line
from rlagent.tools.tail import iter_complete_lines, plan_read, unchanged_since_read

MAX_FILES = 1024
PER_FILE_BYTES = 256 << 10
TOTAL_BYTES = 32 << 20
EVENTS_PER_FILE = 8
"""Error records kept per file and read (the first ones: the root cause is the earliest)."""
MAX_MESSAGE = 300

_NODE = re.compile(r"^node_(\d+)\.log$")
_ROUTER = re.compile(r"^router(?:_(\d+))?\.log$")
_EXCEPTION = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Failure|Interrupt)\b:?.*)$")
_FAILURE = re.compile(
    r"CUDA out of memory|OutOfMemoryError|NCCL error|Watchdog caught collective operation timeout|"
    r"ChildFailedError|Segmentation fault|illegal memory access|exited with code [1-9]"
)
_ROOT_CAUSE = "Root Cause (first observed failure)"
_FIELD = re.compile(r"^\s*(time|host|rank|exitcode|error_file)\s*:\s*(.*)$")


class TreePath(NamedTuple):
    """One file of the tree as listed (a tuple: hundreds are listed at every check-in)."""

    path: str
    rel: str
    role: Role
    node: int | None = None
    rank: int | None = None
    stream: str | None = None


@dataclass
class TreeRead:
    view: MultiNodeView | None
    cursors: dict[str, FileCursor] = field(default_factory=dict)
    events: list[LogEvent] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _base(run_dir: Path, layout: Layout) -> str | None:
    if layout is Layout.H:
        attempt = current_attempt(run_dir)
        return os.path.join(run_dir, "logs", attempt) if attempt else None
    return os.path.join(run_dir, "logs")


def _entries(directory: str) -> list[os.DirEntry]:
    try:
        return sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return []


def _number(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def list_tree(run_dir: Path, layout: Layout, limit: int = MAX_FILES) -> tuple[list[TreePath], int]:
    """(the tree's files, at most `limit` of them; how many there are in all). Symlinks are not
    followed into directories; a file link (trainer.log) is not part of the tree."""
    base = _base(run_dir, layout)
    if base is None:
        return [], 0
    found: list[TreePath] = []
    total = 0
    prefix = os.path.join(run_dir, "")

    def add(entry: os.DirEntry, role: Role, **where: object) -> None:
        nonlocal total
        total += 1
        if len(found) < limit:
            # entry.path is run_dir joined with what was listed: the rest of it is the relative path,
            # without relpath's two abspaths per file (a tree of hundreds of files at every check-in)
            rel = entry.path[len(prefix) :] if entry.path.startswith(prefix) else os.path.relpath(entry.path, run_dir)
            found.append(TreePath(entry.path, rel, role, **where))  # type: ignore[arg-type]

    for role in ("trainer", "inference"):
        for entry in _entries(os.path.join(base, role)):
            if not entry.is_file(follow_symlinks=False):
                continue
            node, router = _NODE.match(entry.name), _ROUTER.match(entry.name)
            if node:
                add(entry, role, node=int(node.group(1)))  # type: ignore[arg-type]
            elif router and role == "inference":
                add(entry, "router", rank=_number(router.group(1)) or 0)
    rdzvs = [e for e in _entries(os.path.join(base, "trainer", "torchrun")) if e.is_dir(follow_symlinks=False)]
    for index, rdzv in enumerate(rdzvs):
        for attempt in (e for e in _entries(rdzv.path) if e.is_dir(follow_symlinks=False)):
            for rank_dir in (e for e in _entries(attempt.path) if e.is_dir(follow_symlinks=False)):
                for entry in _entries(rank_dir.path):
                    if entry.is_file(follow_symlinks=False) and entry.name in ("stdout.log", "stderr.log"):
                        add(entry, "trainer", node=index, rank=_number(rank_dir.name), stream=entry.name[:-4])
    return found, total


@dataclass
class _Pending:
    line: int
    head_line: int | None
    """Line of the newest dated record at or before it (its time is the event's)."""
    message: str
    kind: str
    detail: str = ""
    numbers: list[float] = field(default_factory=list)


def _count_newlines(path: str, start: int, end: int) -> int:
    count = 0
    with open_regular(path) as handle:
        handle.seek(start)
        left = end - start
        while left > 0:
            data = handle.read(min(left, 8 << 20))
            if not data:
                break
            count += data.count(b"\n")
            left -= len(data)
    return count


def _read_file(
    tp: TreePath, cursor: FileCursor | None, tz: tzinfo, budget: int
) -> tuple[FileCursor, list[LogEvent], int, list[str]]:
    """(new cursor, events, bytes read, notes) of one file's new lines; the cursor counts the error records."""
    plan, new = plan_read(tp.path, tp.rel, cursor)
    notes = [plan.note] if plan.note else []
    start, line_no = plan.start, plan.first_line
    cap = min(PER_FILE_BYTES, budget)
    if plan.end - start > cap:
        skip_to = plan.end - cap
        line_no += _count_newlines(tp.path, start, skip_to)
        with open_regular(tp.path) as handle:  # resume at the start of a line
            handle.seek(skip_to)
            partial = handle.readline()
        if partial.endswith(b"\n"):
            line_no += 1
        notes.append(f"{tp.rel}: {skip_to + len(partial) - start} bytes skipped (read its newest {cap >> 10} KB only)")
        start = skip_to + len(partial)
    pending: list[_Pending] = []
    points: list[tuple[int, int]] = []
    head_line: int | None = None
    in_traceback: int | None = None
    root: list[str] | None = None
    root_line = 0
    offset = start
    errors = 0
    lines = list(iter_complete_lines(tp.path, start, plan.end)) if plan.end > start else []
    for index, (end_offset, raw) in enumerate(lines):
        number = line_no + index
        offset = end_offset
        text = clean(raw)
        if root is not None:
            match = _FIELD.match(text)
            if match:
                root.append(f"{match.group(1)}={match.group(2).strip()}")
                continue
            if (text.strip() and not text.strip().startswith(("[", "-", "="))) or len(root) >= 5:
                pending.append(_root_event(root, root_line, head_line))
                root = None
        if _ROOT_CAUSE in text:
            root, root_line = [], number
            continue
        head = parse_head(text)
        if head is not None:
            points.append((number, head.seconds))
            head_line = number
            if head.message.startswith("Step "):
                step = parse_step_line(head.message, tp.role if tp.role == "trainer" else None)
                if step is not None:
                    new.step = max(new.step or 0, step.step)
            if head.level in ("ERROR", "CRITICAL"):
                errors += 1
                pending.append(_Pending(number, head_line, head.message[:MAX_MESSAGE], "rank_error"))
            continue
        stripped = text.strip()
        if stripped.startswith("Traceback (most recent call last)"):
            in_traceback = number
            continue
        exception = _EXCEPTION.match(text)
        if in_traceback is not None and exception and not text.startswith((" ", "\t")):
            errors += 1
            pending.append(
                _Pending(
                    number,
                    head_line,
                    exception.group(1)[:MAX_MESSAGE],
                    "rank_error",
                    detail=f"traceback from line {in_traceback}",
                )
            )
            in_traceback = None
        elif in_traceback is None and _FAILURE.search(text):
            errors += 1
            pending.append(_Pending(number, head_line, stripped[:MAX_MESSAGE], "rank_error"))
    if root is not None:
        pending.append(_root_event(root, root_line, head_line))
    consumed = offset - start
    new.offset, new.lines = offset, line_no + len(lines) - 1
    new.errors += errors
    times = date_points(points, previous=cursor.last_time if cursor else None, mtime=plan.mtime, tz=tz)
    if points:
        new.last_time = times.get(points[-1][0], new.last_time)
    keep = [p for p in pending if p.kind == "root_cause"] + [p for p in pending if p.kind != "root_cause"][:EVENTS_PER_FILE]
    events = [
        LogEvent(
            file=tp.rel,
            line=p.line,
            time=times.get(p.head_line) if p.head_line is not None else None,
            level="ERROR",
            message=p.message,
            detail=p.detail,
            kind=p.kind,
            step=new.step,
            numbers=p.numbers,
        )
        for p in sorted(keep, key=lambda p: p.line)
    ]
    return new, events, consumed, notes


def _root_event(fields: list[str], line: int, head_line: int | None) -> _Pending:
    values = dict(f.split("=", 1) for f in fields)
    rank = re.match(r"(\d+)(?:\s*\(local_rank:\s*(\d+)\))?", values.get("rank", ""))
    exitcode = re.match(r"(-?\d+)", values.get("exitcode", ""))
    numbers = [float(rank.group(1))] if rank else []
    message = "torchrun root cause (first observed failure): " + ", ".join(f"{k} {v}" for k, v in values.items())
    return _Pending(
        line, head_line, message[:MAX_MESSAGE], "root_cause", numbers=numbers + ([float(exitcode.group(1))] if exitcode else [])
    )


def read_tree(run_dir: Path, layout: Layout, cursors: dict[str, FileCursor], tz: tzinfo) -> TreeRead:
    """Read what is new in every file of the tree; never raises for a bad file."""
    paths, total = list_tree(run_dir, layout)
    if not paths:
        return TreeRead(view=None)
    out = TreeRead(view=MultiNodeView(total_files=total))
    if total > len(paths):
        out.notes.append(f"multi-node logs: {total} files, read the first {len(paths)} only")
    budget = TOTAL_BYTES
    starved = 0
    assert out.view is not None
    for tp in paths:
        cursor = cursors.get(tp.rel)
        if unchanged_since_read(tp.path, cursor) is not None:
            new = cursor  # a quiet rank: one stat, and its cursor kept as it is (cursors are replaced, never changed)
        elif budget <= 0:
            starved += 1
            new = cursor
        else:
            try:
                new, events, used, notes = _read_file(tp, cursor, tz, budget)
            except OSError as exc:
                out.notes.append(f"{tp.rel}: cannot be read ({exc.strerror or exc})")
                new = cursor
            else:
                budget -= used
                out.view.bytes_read += used
                out.events += events
                out.notes += notes
        if new is not None:
            out.cursors[tp.rel] = new
        out.view.files.append(
            TreeFile(
                file=tp.rel, role=tp.role, node=tp.node, rank=tp.rank, stream=tp.stream,
                step=new.step if new else None, last_time=new.last_time if new else None, errors=new.errors if new else 0,
            )
        )  # fmt: skip
    if starved:
        out.notes.append(
            f"multi-node logs: {starved} files wait for the next check-in (read budget of {TOTAL_BYTES >> 20} MB spent)"
        )
    return out


def failure_order(event: LogEvent) -> tuple:
    """Which error record came first: the earliest dated one, then undated ones (a rank's stderr has
    no time), each by file and line."""
    return (event.time is None, event.time or datetime.max, event.file, event.line)


def first_failures(events: list[LogEvent]) -> list[LogEvent]:
    """The first error record of each tree (an attempt's `trainer/` and `inference/` logs): what
    `first_failure` names, which the collector keeps however many records follow it."""
    first: dict[str, LogEvent] = {}
    for event in events:
        if event.kind != "rank_error":
            continue
        tree = _tree_of(event.file)
        if tree not in first or failure_order(event) < failure_order(first[tree]):
            first[tree] = event
    return list(first.values())


def _tree_of(rel: str) -> str:
    """The folder of the tree a file is in: `logs/attempt_2` for `logs/attempt_2/trainer/node_0.log`."""
    cuts = [at for role in ("/trainer/", "/inference/") if (at := rel.find(role)) != -1]
    return rel[: min(cuts)] if cuts else rel


def first_failure(events: list[LogEvent], files: dict[str, TreeFile]) -> tuple[LogEvent, str] | None:
    """The first failing rank: torchrun's own `Root Cause` block when it was printed, else the
    earliest dated error record of the tree (a record without a time comes after dated ones).
    Returns the event and how it was chosen."""
    roots = [e for e in events if e.kind == "root_cause"]
    if roots:
        return roots[0], "torchrun's Root Cause (first observed failure)"
    errors = [e for e in events if e.kind == "rank_error" and e.file in files]
    if not errors:
        return None
    first = min(errors, key=failure_order)
    return first, "the earliest error record across nodes and ranks" if first.time else "the first error record found"
