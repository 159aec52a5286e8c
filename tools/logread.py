"""Read what is new in one log file: step metrics, eval scores, notable events, warnings.

Turns the scanner's candidate lines into dated, classified facts. Knows prime-rl's log
formats, nothing of the graph.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path
from typing import NamedTuple

from rlagent.models.observation import FileCursor, LogEvent, WarningGroup
from rlagent.tools.dayclock import PENDING, DayClock
from rlagent.tools.layout import process_of
from rlagent.tools.logscan import INFERENCE_NEEDLES, NEEDLES, ScannedLine, ScanResult, scan_file
from rlagent.tools.patterns import classify, detail_kinds, message_template
from rlagent.tools.steplines import EvalLine, parse_eval_line, parse_step_line
from rlagent.tools.steprows import StepLines
from rlagent.tools.tail import ReadPlan, plan_read

_WARN_LEVELS = ("WARNING", "ERROR", "CRITICAL")


@dataclass
class LogRead:
    rel: str
    cursor: FileCursor | None
    bytes_read: int = 0
    steps: StepLines = field(default_factory=StepLines)
    """(step line, time), bounded to what the history keeps (tools.steprows)."""
    evals: list[EvalLine] = field(default_factory=list)
    events: list[LogEvent] = field(default_factory=list)
    """Classified events (kind set), the newest `keep_per_kind` of each kind, in line order."""
    groups: dict[str, WarningGroup] = field(default_factory=dict)
    """Every WARNING/ERROR record of this read, grouped by message template."""
    step_counts: dict[str, dict[int, int]] = field(default_factory=dict)
    """kind -> step -> classified lines read, for logs that carry steps (uncapped)."""
    notes: list[str] = field(default_factory=list)
    fresh: bool = False
    moved_from: str | None = None
    """The rest of a rotated log, read under its new name (tools.rotation)."""


class _Raw(NamedTuple):
    """A notable line before it becomes a LogEvent: most are dropped or only counted."""

    line: int
    when: int | None
    """A moment of the read (tools.dayclock), made a datetime when the read is done."""
    level: str
    message: str
    detail: str
    kind: str | None
    numbers: list[float]
    step: int | None


def read_log(
    path: Path, rel: str, cursor: FileCursor | None, tz: tzinfo, keep_per_kind: int = 50, anchor: float | None = None
) -> LogRead:
    """Read `path` from its cursor; bad input becomes notes, never an exception. A read from the
    start dates its times of day by the file's mtime, or by `anchor` (tools.dayclock.shared_anchor).

    A long cold read meets tens of thousands of warnings: they are counted into groups and
    only the newest `keep_per_kind` events of each kind become LogEvents.
    """
    try:
        plan, new_cursor = plan_read(path, rel, cursor)
    except FileNotFoundError:
        note = f"{rel} was deleted since the last check-in" if cursor else f"{rel} disappeared while being read"
        return LogRead(rel, None, notes=[note])
    except OSError as exc:
        return LogRead(rel, cursor, notes=[f"{rel}: unreadable ({exc.strerror or exc})"])
    out = LogRead(rel, new_cursor, fresh=plan.fresh)
    if plan.note:
        out.notes.append(plan.note)
    if plan.end <= plan.start:
        return out
    # The candidate lines are taken a chunk at a time, dated as they come (moments, tools.dayclock)
    # and dropped: only what the records keep is dated for good once the read's anchor is known.
    clock = DayClock(None if plan.fresh else new_cursor.last_time, tz)
    records = _Records(rel, new_cursor, keep_per_kind)

    def take(lines: list[ScannedLine], stamps: list[tuple[int, int]]) -> None:
        points = sorted({(ln.line_no, ln.head.seconds) for ln in lines if ln.head} | set(stamps))
        moments = {line_no: clock.moment(seconds) for line_no, seconds in points}
        for line in lines:
            records.read(line, moments.get(line.line_no), out)

    scan = _scan(path, rel, plan, out.notes, take)
    if scan is None:
        return LogRead(rel, cursor, notes=out.notes)
    new_cursor.offset = scan.end
    new_cursor.lines = plan.first_line - 1 + scan.newlines
    out.bytes_read = scan.end - plan.start
    if scan.binary_lines:
        out.notes.append(f"{rel}: {scan.binary_lines} line(s) of binary junk (NUL bytes or invalid UTF-8), not quoted")
    if scan.long_lines:
        out.notes.append(f"{rel}: {scan.long_lines} over-long line(s) read only in part")
    to_time = clock.resolver(anchor if anchor is not None and plan.fresh else plan.mtime)
    if clock.fed:
        new_cursor.last_time = to_time(clock.newest if clock.newest is not None else PENDING)
    records.finish(out, to_time)
    return out


def _scan(path: Path, rel: str, plan: ReadPlan, notes: list[str], sink) -> ScanResult | None:
    """Scan the planned range, its candidate lines to `sink`; None (and a note) if the file went away."""
    try:
        needles = INFERENCE_NEEDLES if Path(rel).name.startswith("inference") else NEEDLES
        return scan_file(path, plan.start, plan.end, plan.first_line, needles, sink)
    except FileNotFoundError:
        notes.append(f"{rel} was deleted while being read")
    except OSError as exc:
        notes.append(f"{rel}: read failed ({exc.strerror or exc})")
    return None


class _Records:
    """What the scanned lines say, accumulated: steps and evals (straight into the LogRead), the
    newest events of each kind with a count per step, and WARNING/ERROR records by template."""

    def __init__(self, rel: str, cursor: FileCursor, keep_per_kind: int) -> None:
        self.rel = rel
        self.cursor = cursor
        self.process_hint = process_of(rel)
        self.kept: dict[str, deque[_Raw]] = defaultdict(lambda: deque(maxlen=keep_per_kind))
        self.step_counts: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.groups: dict[str, list] = {}  # template -> [level, count, first _Raw, last _Raw]

    def keep(self, raw: _Raw) -> None:  # raw.kind is set
        """Keep the newest events of each kind, and count every one per step."""
        self.kept[raw.kind].append(raw)
        if raw.step is not None:
            self.step_counts[raw.kind][raw.step] += 1

    def read(self, line: ScannedLine, when: int | None, out: LogRead) -> None:
        head = line.head
        if head is None:
            kind, numbers = classify(line.text, "STDERR")
            if kind is not None:
                self.keep(_Raw(line.line_no, when, "STDERR", line.text, "", kind, numbers, self.cursor.step))
            return
        if head.level not in _WARN_LEVELS:
            self._orphans(line, when)
        if self._step_or_eval(head.message, when, out):
            return
        self._record(line, head.level, when)

    def _orphans(self, line: ScannedLine, when: int | None) -> None:
        """Lines with no head of their own after an INFO/SUCCESS line (C++ or torchrun stderr)."""
        for index, text in enumerate(line.detail):
            kind, numbers = classify(text, "STDERR") if text else (None, [])
            if kind is not None:
                self.keep(_Raw(line.line_no + 1 + index, when, "STDERR", text, "", kind, numbers, self.cursor.step))

    def _step_or_eval(self, message: str, when: int | None, out: LogRead) -> bool:
        """A step or eval line goes to `out` (and moves the cursor's step); True if it was one."""
        if message.startswith("Step "):
            step_line = parse_step_line(message, self.process_hint)
            if step_line is not None:
                out.steps.append((step_line, when))
                if step_line.process == self.process_hint or self.process_hint is None:
                    self.cursor.step = step_line.step
                return True
        if message.startswith("Evaluated "):
            eval_line = parse_eval_line(message)
            if eval_line is not None:
                if eval_line.step is None:
                    eval_line.step = self.cursor.step
                out.evals.append(eval_line)
                return True
        return False

    def _record(self, line: ScannedLine, level: str, when: int | None) -> None:
        """A record: classified, grouped when a warning or error, its detail lines classified too."""
        assert line.head is not None
        message = line.head.message
        detail = "\n".join(line.detail)
        kind, numbers = classify(message, level)
        if kind is None and level in ("ERROR", "CRITICAL") and "/envs/" in f"/{self.rel}":
            kind = "env_error"  # an ERROR in an env server log is an env error whatever its text
        raw = _Raw(line.line_no, when, level, message, detail, kind, numbers, self.cursor.step)
        if level in _WARN_LEVELS:
            template = message_template(message)
            group = self.groups.get(template)
            if group is None:
                self.groups[template] = [level, 1, raw, raw]
            else:
                group[1] += 1
                group[3] = raw
        if kind is not None:
            self.keep(raw)
        for extra, extra_numbers, index in detail_kinds(line.detail):
            if extra != kind:
                text = line.detail[index]
                self.keep(_Raw(line.line_no + 1 + index, when, level, text, "", extra, extra_numbers, raw.step))

    def finish(self, out: LogRead, to_time: Callable[[int], datetime]) -> None:
        """Turn what was kept into events and groups, their moments into datetimes."""
        rel = self.rel
        out.steps.retime(to_time)
        out.events = sorted(
            (_event(rel, r, to_time) for bucket in self.kept.values() for r in bucket), key=lambda e: (e.line, e.kind or "")
        )
        out.step_counts = {kind: dict(counts) for kind, counts in self.step_counts.items()}
        out.groups = {
            template: WarningGroup(
                template=template, level=level, count=count, first=_event(rel, first, to_time), last=_event(rel, last, to_time)
            )
            for template, (level, count, first, last) in self.groups.items()
        }


def _event(rel: str, raw: _Raw, to_time: Callable[[int], datetime]) -> LogEvent:
    detail = raw.detail if len(raw.detail) <= 2000 else f"{raw.detail[:500]}\n…\n{raw.detail[-1500:]}"  # the exception is last
    return LogEvent(
        file=rel,
        line=raw.line,
        time=None if raw.when is None else to_time(raw.when),
        level=raw.level,
        message=raw.message.split("\n", 1)[0][:500],
        detail=detail,
        kind=raw.kind,
        step=raw.step,
        numbers=raw.numbers,
    )
