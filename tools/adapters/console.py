"""Console logs of verl, TRL and OpenRLHF (and prime-rl excerpts): metric rows, crash and warning
signatures, tracebacks, resume lines and WARNING/ERROR groups, read from a byte offset.

The framework parsers (tools/frameworks) recognise one line each; this module walks the new lines of
a file once, numbers TRL's step-less rows, files signatures under the event kinds the rules judge, and
keeps the cursor (offset, lines, newest step) so the next check-in starts where this one stopped.
"""

from __future__ import annotations

import functools
import math
import re
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from rlagent.models.observation import EvalPoint, FileCursor, LogEvent, WarningGroup
from rlagent.tools.adapters import lineblocks
from rlagent.tools.adapters.base import FileRead, StepRow
from rlagent.tools.adapters.lineblocks import HeadAndTail, LineBlocks
from rlagent.tools.bounds import NUMBER, clamp_time, plausible_step, plausible_time
from rlagent.tools.frameworks import signatures
from rlagent.tools.frameworks.lines import LogLine, decode, iter_lines
from rlagent.tools.frameworks.records import MetricRow
from rlagent.tools.frameworks.vocabulary import mapping
from rlagent.tools.metric_names import canonical_split
from rlagent.tools.patterns import message_template
from rlagent.tools.safefs import open_regular
from rlagent.tools.steprows import StepLines
from rlagent.tools.tail import plan_read
from rlagent.tools.untrusted import strip_controls as sanitize_line

MAX_LINE = 1 << 20
"""A longer `\\n` line is cut to this many characters before parsing (a 100 MB line must not hang)."""

# signature finding -> event kind the rules read (tools/patterns.py kinds where prime-rl has one)
KIND_OF_FINDING = {
    "run_crashed": "crash",
    "host_oom": "host_oom",
    "cuda_oom": "cuda_oom",
    "nccl_error": "nccl",
    "inference_crashed": "inference_crashed",
    "inference_unreachable": "inference_abort",
    "reward_fn_error": "reward_fn_error",
    "run_finished": "finished",
    "nan_detected": "nonfinite_dropped",
}
_RESUMED = re.compile(
    r"Resuming from .*global_step_(\d+)|Load from checkpoint folder: .*global_step_(\d+)|"
    r"Loaded checkpoint from \S*global_step(\d+)|Continuing training from checkpoint, will skip to saved global_step"
)
# a new launch in the same console file (torchrun / accelerate banner, Ray start-up)
_LAUNCH_BANNER = re.compile(r"Setting OMP_NUM_THREADS environment variable for each process|Started a local Ray instance")
_LEVEL = re.compile(r"^(?:\[rank\d+\]:\s*)?(?:(?P<word>WARNING|ERROR|CRITICAL)\b|\[?(?P<glog>[WE])\d{4} \d\d:\d\d:\d\d)")
_TRACEBACK = lineblocks.TRACEBACK.decode()  # "Traceback (most recent call last):", as the skipped middle counts it
# A traceback frame. A published excerpt is often cut inside a traceback, above its header: its first
# frame then stands for the header (findings.md, excerpts: "lines cut mid-way").
_FRAME = re.compile(r'^\s*(?:\[rank\d+\]:\s*)?File "[^"]+", line \d+, in ')
_EXCEPTION = re.compile(
    r"^\s*(?:\[rank\d+\]:\s*)?([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Failure)\b(?:\([\w.]+\))?(?::.*)?)$"
)
_TRACEBACK_LINES = 200


RowParser = Callable[[LogLine, "ConsoleState"], list[MetricRow]]


@dataclass
class ConsoleState:
    """What a read needs to know of the file before its new bytes."""

    step: int | None = None
    """Newest step seen in the file."""
    logging_steps: int | None = None
    """TRL: the console has no step; rows are numbered every `logging_steps` from `step`."""
    resume_base: Callable[[int | None], int] | None = None
    """TRL: the step a relaunch resumes from (the newest checkpoint at or before the last step)."""
    memo: dict = field(default_factory=dict)
    """A parser's own state within one read (e.g. the last tqdm postfix seen)."""


@dataclass
class _Acc:
    rel: str
    keep_per_kind: int
    kept: dict[str, deque] = field(default_factory=dict)
    counts: dict[str, dict[int, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    groups: dict[str, list] = field(default_factory=dict)

    def event(self, kind: str, line: int, level: str, message: str, step: int | None, detail: str = "", numbers=()) -> None:
        bucket = self.kept.setdefault(kind, deque(maxlen=self.keep_per_kind))
        bucket.append(
            LogEvent(
                file=self.rel,
                line=line,
                level=level,
                message=sanitize_line(message)[:500],
                detail=detail[-2000:],
                kind=kind,
                step=step,
                numbers=list(numbers),
            )
        )
        if step is not None:
            self.counts[kind][step] += 1

    def group(self, level: str, line: int, message: str, step: int | None) -> None:
        text = sanitize_line(message)[:500]
        template = message_template(text)
        event = LogEvent(file=self.rel, line=line, level=level, message=text, step=step)
        known = self.groups.get(template)
        if known is None:
            self.groups[template] = [level, 1, event, event]
        else:
            known[1] += 1
            known[3] = event


def analyse(
    text: str,
    rel: str,
    framework: str,
    parse_rows: RowParser,
    state: ConsoleState,
    *,
    first_lineno: int = 1,
    keep_per_kind: int = 50,
    when: datetime | None = None,
) -> FileRead:
    """Everything a console text says, as a FileRead (cursor not set). `state.step` moves on."""
    out = FileRead(rel=rel, cursor=None)
    lines = _lines(text, first_lineno)
    acc = _Acc(rel, keep_per_kind)
    saw_steps = state.step is not None
    step_at: dict[int, int | None] = {}
    in_traceback = -(10**9)
    metric_lines: set[int] = set()
    for index, line in enumerate(lines):
        body = line.text
        if ("OMP_NUM_THREADS" in body or "Ray instance" in body) and saw_steps and _LAUNCH_BANNER.search(body):
            if state.resume_base is not None:
                state.step = state.resume_base(state.step)
            acc.event("resumed", line.lineno, "INFO", body, state.step)
        elif ("esum" in body or "heckpoint" in body) and (m := _RESUMED.search(body)) is not None:
            numbers = [float(g) for g in m.groups() if g is not None]
            if numbers and framework != "trl" and plausible_step(numbers[0]):
                state.step = int(numbers[0])
            acc.event("resumed", line.lineno, "INFO", body, state.step, numbers=numbers)
        for row in parse_rows(line, state):
            if row.step is None:
                if row.kind == "train":
                    every = state.logging_steps or 1
                    row.step = ((state.step or 0) // every + 1) * every
                else:
                    row.step = state.step
            if row.step is None:
                continue
            if not plausible_step(row.step):  # junk: never the run's step (and it could not be saved)
                if OUT_OF_RANGE not in out.notes:
                    out.notes.append(OUT_OF_RANGE)
                continue
            if row.kind == "train":
                state.step = row.step
                saw_steps = True
            add_row(out, framework, row, when)
            if row.kind != "summary":
                metric_lines.add(index)
        step_at[index] = state.step
        if index and _calls_reward(lines[index - 1].text) and _EXCEPTION.match(body):
            acc.event("reward_fn_error", line.lineno, "ERROR", body.strip(), state.step)
            if body.lstrip().startswith("[rank"):  # a rank's uncaught exception, as torchrun prints it
                acc.event("crash", line.lineno, "ERROR", body.strip(), state.step)
        level = _LEVEL.match(body)
        if level is not None:
            name = level.group("word") or ("WARNING" if level.group("glog") == "W" else "ERROR")
            acc.group(name, line.lineno, body, state.step)
        if _TRACEBACK in body:
            detail = _traceback_detail(lines, index)
            acc.event("traceback", line.lineno, "ERROR", body.strip(), state.step, detail="\n".join(detail))
            in_traceback = index
        elif index - in_traceback > _TRACEBACK_LINES and "File " in body and _FRAME.match(body):
            detail = _traceback_detail(lines, index - 1)
            acc.event(
                "traceback",
                line.lineno,
                "ERROR",
                "(traceback, its header above the excerpt) " + body.strip(),
                state.step,
                detail="\n".join(detail),
            )
            in_traceback = index
    for match in signatures.scan(_candidates(lines, metric_lines)):
        kind = KIND_OF_FINDING.get(match.finding or "")
        if kind is None:
            continue
        index = _index_of(lines, match.lineno)
        step = step_at.get(index, state.step)
        numbers = [float(match.details["exitcode"])] if match.details.get("exitcode", "").lstrip("-").isdigit() else []
        message = match.text
        if match.details.get("rank"):
            message += f" (root cause: rank {match.details['rank']}, exit code {match.details.get('exitcode', '?')})"
        acc.event(kind, match.lineno, "ERROR", message, step, numbers=numbers)
        if match.fatal and kind not in ("crash", "finished"):
            acc.event("crash", match.lineno, "ERROR", message, step, numbers=numbers)
    _cut_in_reward_code(lines, acc, state.step)
    out.events = sorted((e for bucket in acc.kept.values() for e in bucket), key=lambda e: (e.line, e.kind or ""))
    out.counts = {kind: dict(c) for kind, c in acc.counts.items()}
    out.groups = {
        template: WarningGroup(template=template, level=level, count=count, first=first, last=last)
        for template, (level, count, first, last) in acc.groups.items()
    }
    return out


# A timestamp a launcher or `ts` put in front of every line: `[2026-03-11 17:47:54] `.
_STAMP = re.compile(r"^\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\] ?")
# The call of a reward function in the frame above an exception (TRL `_calculate_rewards`: `reward_func(`;
# verl reward managers: `compute_score(`).
_REWARD_CALL = re.compile(r"\b(?:reward_func|compute_score|reward_fn)\(")


def _calls_reward(text: str) -> bool:
    """`_REWARD_CALL.search(text)`, asked only of a line holding one of its names with its `(`: the
    regex, which starts with `\b`, would be tried at every character of every line after a step line."""
    return ("reward_func(" in text or "compute_score(" in text or "reward_fn(" in text) and _REWARD_CALL.search(text) is not None


_REWARD_FRAME = re.compile(r'File "[^"]*(?:/reward_score/|/reward_manager/|/reward_loop/|/[^/"]*reward[^/"]*\.py")')
_CODE_OR_FRAME = re.compile(r'^\s+|^\s*(?:\[rank\d+\]:\s*)?File "')


def _cut_in_reward_code(lines: list[LogLine], acc: _Acc, step: int | None) -> None:
    """A text that ends inside a traceback (an excerpt cut before its exception line) whose frames
    pass through reward code (verl reward_score / reward_manager / a custom `*reward*.py`, TRL reward
    functions): the exception was raised in the reward function."""
    tail = [ln for ln in lines[-_TRACEBACK_LINES:] if ln.text.strip()]
    if not tail or not _CODE_OR_FRAME.match(tail[-1].text) or _EXCEPTION.match(tail[-1].text.strip()):
        return
    block = []
    for line in reversed(tail):
        if not _CODE_OR_FRAME.match(line.text):
            break
        block.append(line)
    frames = [ln for ln in reversed(block) if _REWARD_FRAME.search(ln.text)]
    if frames:
        acc.event(
            "reward_fn_error", frames[-1].lineno, "ERROR", "(traceback cut in reward code) " + frames[-1].text.strip(), step
        )


# Lines a signature, a traceback or a ChildFailedError root-cause block can be on (signatures.scan runs
# ~40 patterns per line; most lines of a long log are step lines and progress bars that none can match):
# a line holding one of these words, or starting with one of the root-cause block's fields. Substring
# tests, not one regex of them all: Python's regex engine tries such an alternation at every character
# (12 us for a progress bar's segment, 5 us this way).
_SIGNAL_WORDS = (
    "rror", "xception", 'File "', "Traceback", "Root Cause", "=====", "Killed", "killed", "OOM", "out of memory",
    "low on memory", "memory pressure", "NCCL", "nccl", "Watchdog", "watchdog", "failed", "finished",
    "Final validation", "train_runtime", "Request error", "Could not override", "Overflow", "loss scale",
    "return code", "Signal 9", "Engine", "collective_rpc", "Dropping", "Server is not up", "can't be reached",
    "reward_func", "compute_score",
)  # fmt: skip
_SIGNAL_FIELD = re.compile(r"\s*(?:time|host|rank|exitcode|error_file|traceback)\s*:")


def _signal(text: str) -> bool:
    for word in _SIGNAL_WORDS:
        if word in text:
            return True
    return _SIGNAL_FIELD.match(text) is not None


def _candidates(lines: list[LogLine], metric_lines: set[int]) -> list[LogLine]:
    """Lines worth matching signatures on: not a metric line, and holding one of their words."""
    out = []
    after_frame = False
    for i, line in enumerate(lines):
        keep = i not in metric_lines and (after_frame or _signal(line.text))
        if keep:
            out.append(line)
        after_frame = keep and 'File "' in line.text  # the code line under a frame keeps the traceback's shape
    return out


def _lines(text: str, first_lineno: int) -> list[LogLine]:
    """Cleaned, non-blank segments (lines.iter_lines), each physical line cut to MAX_LINE first so that
    one 100 MB line costs no more than a long one."""
    out: list[LogLine] = []
    for offset, physical in enumerate(text.split("\n")):
        if len(physical) > MAX_LINE:
            physical = physical[:MAX_LINE]
        if not physical.strip():
            continue
        if "\x1b" not in physical and "(" not in physical[:1] and "[repeated" not in physical:
            for segment in physical.split("\r") if "\r" in physical else (physical,):
                if segment.strip():
                    out.append(_plain(LogLine(first_lineno + offset, segment.rstrip(), None)))
            continue
        for line in iter_lines(physical, first_lineno + offset):
            out.append(_plain(line))
    return out


def _plain(line: LogLine) -> LogLine:
    text = line.text if len(line.text) <= MAX_LINE else line.text[:MAX_LINE]
    if text.startswith("[") and (m := _STAMP.match(text)) is not None:
        text = text[m.end() :]
    return line if text is line.text else LogLine(line.lineno, text, line.actor)


def _index_of(lines: list[LogLine], lineno: int) -> int:
    lo, hi = 0, len(lines)
    while lo < hi:
        mid = (lo + hi) // 2
        if lines[mid].lineno < lineno:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _traceback_detail(lines: list[LogLine], index: int) -> list[str]:
    """The lines of a traceback below its head, up to and including the exception line."""
    detail = []
    for line in lines[index + 1 : index + 1 + _TRACEBACK_LINES]:
        detail.append(sanitize_line(line.text)[:300])
        if _EXCEPTION.match(line.text) and not line.text.startswith((" ", "\t")):
            break
    return detail


@functools.lru_cache(maxsize=256)
def _mapping(framework: str, keys: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple(mapping(framework, keys).items())


def _normalise(framework: str, raw: dict[str, float]) -> dict[str, float]:
    """vocabulary.normalise, with the name mapping cached per key set (every row of a log has the same keys)."""
    out: dict[str, float] = {}
    for name, key in _mapping(framework, tuple(raw)):
        value = raw[key]
        if isinstance(value, NUMBER):
            out[name] = float(value)
        elif value is None:
            out[name] = math.nan
    return out


@functools.lru_cache(maxsize=256)
def _plan(framework: str, keys: tuple[str, ...]) -> tuple[tuple[str, str, str, bool], ...]:
    """(raw key, table, canonical name, 1 - value?) for one key set: where each raw value goes."""
    plan = []
    for name, key in _mapping(framework, keys):
        trainer, orchestrator, evals = canonical_split({name: 0.0})
        for table, found in (("trainer", trainer), ("orchestrator", orchestrator), ("evals", evals)):
            for canonical, value in found.items():
                plan.append((key, table, canonical, value == 1.0 and name == "zero_std_frac"))
    return tuple(plan)


def _split(framework: str, raw: dict) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    out: dict[str, dict[str, float]] = {"trainer": {}, "orchestrator": {}, "evals": {}}
    for key, table, canonical, complement in _plan(framework, tuple(raw)):
        value = raw[key]
        if value is None:
            number = math.nan
        elif isinstance(value, NUMBER):
            number = float(value)
        else:
            continue
        target = out[table]
        if complement:
            target.setdefault(canonical, 1.0 - number)
        else:
            target[canonical] = number
    return out["trainer"], out["orchestrator"], out["evals"]


OUT_OF_RANGE = "skipped metric row(s) with an out-of-range step"


def add_row(out: FileRead, framework: str, row: MetricRow, when: datetime | None) -> None:
    if row.kind.startswith("prime-rl:"):  # prime-rl step lines are parsed into canonical names already
        process = row.kind.split(":", 1)[1]
        trainer, orchestrator, evals = (row.values, {}, {}) if process == "trainer" else ({}, row.values, {})
        row = MetricRow(step=row.step, values=row.values, lineno=row.lineno, kind="train", time=row.time)
    else:
        trainer, orchestrator, evals = _split(framework, row.values)
    if row.kind == "val" or row.kind == "summary":
        trainer, orchestrator = {}, {}
    assert row.step is not None
    if not plausible_step(row.step):  # a step past bounds.MAX_STEP is junk (and could not be saved)
        if OUT_OF_RANGE not in out.notes:
            out.notes.append(OUT_OF_RANGE)
        return
    stamp = datetime.fromtimestamp(row.time, UTC) if plausible_time(row.time) else when  # 1e300 is junk, not a date
    if trainer:
        out.rows.append(StepRow("trainer", row.step, trainer, stamp))
    if orchestrator:
        out.rows.append(StepRow("orchestrator", row.step, orchestrator, stamp))
    for name, score in evals.items():
        out.evals.append(EvalPoint(env=name, step=row.step, score=score))
    if stamp is not None and (trainer or orchestrator):
        for process in ("trainer", "orchestrator") if trainer and orchestrator else ("trainer" if trainer else "orchestrator",):
            out.times[process] = stamp
        out.newest = stamp if out.newest is None or stamp > out.newest else out.newest


def analyse_blocks(
    blocks: Iterable[tuple[int, bytes]],
    rel: str,
    framework: str,
    parse_rows: RowParser,
    state: ConsoleState,
    keep_per_kind: int,
    when: datetime,
) -> FileRead:
    """`analyse` over numbered blocks of whole lines, `state` carried across: what a block boundary cuts (a
    traceback's context lines) is what a check-in boundary cuts anyway. Past the first block, the rows
    are held as the collector keeps them (tools.steprows: each step merged, the newest KEEP_STEPS and
    the early values), so a 64 MB catch-up of a long run holds a bounded history, not a row per line."""
    out: FileRead | None = None
    rows: StepLines | None = None
    expected: int | None = None
    for lineno, block in blocks:
        if expected is not None and lineno != expected:  # lines skipped (HeadAndTail): the step before is unknown
            state.step = None
        expected = lineno + block.count(b"\n")
        part = analyse(
            decode(block), rel, framework, parse_rows, state, first_lineno=lineno, keep_per_kind=keep_per_kind, when=when
        )
        if out is None:
            out = part  # a read of one block: its rows as they came
            continue
        if rows is None:
            rows = StepLines()
            fold_rows(rows, out)
        fold_rows(rows, part)
        _merge_part(out, part, keep_per_kind)
    if out is None:
        return FileRead(rel=rel, cursor=None)
    if rows is not None:
        out.rows = [StepRow(line.process, line.step, line.values, stamp) for line, stamp in rows]
    return out


class HeldRows:
    """A read's rows gathered a part at a time and held as the collector keeps them (tools.steprows:
    each step merged, the newest KEEP_STEPS and the early values), with the parts' evals and times."""

    def __init__(self, out: FileRead) -> None:
        self.out = out
        self.rows = StepLines()

    def take(self, part: FileRead) -> None:
        fold_rows(self.rows, part)
        self.out.evals += part.evals
        self.out.times.update(part.times)

    def finish(self) -> None:
        self.out.rows = [StepRow(line.process, line.step, line.values, stamp) for line, stamp in self.rows]


def fold_rows(rows: StepLines, read: FileRead) -> None:
    """Move a read's rows into a bounded table (tools.steprows), as the collector keeps them."""
    for row in read.rows:
        rows.add(row.process, row.step, row.values, row.when)
    read.rows = []


def _merge_part(out: FileRead, part: FileRead, keep_per_kind: int) -> None:
    out.rows += part.rows
    out.evals += part.evals
    out.notes += part.notes
    events = out.events + part.events
    by_kind: dict[str | None, list[LogEvent]] = defaultdict(list)
    for event in events:
        by_kind[event.kind].append(event)
    out.events = sorted((e for bucket in by_kind.values() for e in bucket[-keep_per_kind:]), key=lambda e: (e.line, e.kind or ""))
    for kind, steps in part.counts.items():
        mine = out.counts.setdefault(kind, {})
        for step, n in steps.items():
            mine[step] = mine.get(step, 0) + n
    for template, group in part.groups.items():
        known = out.groups.get(template)
        out.groups[template] = (
            group if known is None else known.model_copy(update={"count": known.count + group.count, "last": group.last})
        )
    out.times.update(part.times)
    if part.newest is not None and (out.newest is None or part.newest > out.newest):
        out.newest = part.newest


def read_console(
    path: Path,
    rel: str,
    cursor: FileCursor | None,
    framework: str,
    parse_rows: RowParser,
    state: ConsoleState,
    *,
    keep_per_kind: int = 50,
    steps_in_lines: bool = True,
) -> FileRead:
    """`path` from its cursor: complete lines only (a half-written last line waits), bounded per read.
    A backlog over MAX_READ is read as its head and its newest bytes when every row names its step
    (`steps_in_lines`); otherwise (TRL numbers its rows by counting them) oldest first, a note saying
    the read is behind."""
    try:
        plan, new_cursor = plan_read(path, rel, cursor)
    except FileNotFoundError:
        note = f"{rel} was deleted since the last check-in" if cursor else f"{rel} disappeared while being read"
        return FileRead(rel, None, notes=[note])
    except OSError as exc:
        return FileRead(rel, cursor, notes=[f"{rel}: unreadable ({exc.strerror or exc})"])
    notes = [plan.note] if plan.note else []
    if not plan.fresh and cursor is not None:
        state.step = cursor.step
    mtime = datetime.fromtimestamp(clamp_time(plan.mtime), UTC)
    try:
        with open_regular(path) as handle:  # swapped for a FIFO since planned: refused, never a hang
            blocks = backlog_blocks(handle, plan.start, plan.end, steps_in_lines)
            read = analyse_blocks(blocks.numbered(plan.first_line), rel, framework, parse_rows, state, keep_per_kind, mtime)
    except OSError as exc:
        return FileRead(rel, cursor, notes=[*notes, f"{rel}: read failed ({exc.strerror or exc})"])
    notes += backlog_notes(rel, blocks, plan.start, plan.end, plan.first_line)
    cut = blocks.taken
    new_cursor.offset = plan.start + cut
    new_cursor.lines = plan.first_line - 1 + blocks.newlines
    new_cursor.step = state.step
    new_cursor.last_time = mtime if cut else (cursor.last_time if cursor else None)
    read.cursor = new_cursor
    read.fresh = plan.fresh
    read.notes = notes + read.notes
    read.bytes_read = cut
    read.behind = isinstance(blocks, LineBlocks) and blocks.stopped
    # The time of the newest line read so far, as prime-rl's logs say it (tools.adapters.primerl):
    # an offline check-in that finds nothing new keeps the run's own "now", not the wall clock's.
    read.newest = new_cursor.last_time
    return read


def backlog_blocks(handle: BinaryIO, start: int, end: int, steps_in_lines: bool) -> LineBlocks | HeadAndTail:
    """The blocks of whole lines a check-in reads of [start, end): a backlog over MAX_READ as its head
    and newest bytes when every row names its step, else oldest first for up to READ_BUDGET_S."""
    handle.seek(start)
    if steps_in_lines and end - start > lineblocks.MAX_READ:
        return HeadAndTail(handle, start, end)
    deadline = None if steps_in_lines else lineblocks.read_deadline()
    return LineBlocks(handle, max(0, end - start), deadline)


def backlog_notes(rel: str, blocks: LineBlocks | HeadAndTail, start: int, end: int, first_line: int) -> list[str]:
    """What a read of [start, end) left out or cut, in words."""
    notes = []
    if isinstance(blocks, HeadAndTail) and blocks.skipped_to > blocks.skipped_from:
        first = first_line + blocks.head.newlines
        notes.append(
            f"{rel}: {_size(blocks.skipped_to - blocks.skipped_from)} of older lines not read "
            f"(lines {first}-{first + blocks.skipped_lines - 1}): a backlog over {_size(lineblocks.MAX_READ)} is read as "
            f"its first {_size(blocks.head_length)} and its newest {_size(blocks.tail_length)}, so the history has a gap there"
            + _tracebacks_in(first, blocks.skipped_tracebacks)
        )
    elif isinstance(blocks, LineBlocks) and blocks.stopped:
        notes.append(
            f"{rel}: {_size(blocks.taken)} of {_size(end - start)} new read in {lineblocks.READ_BUDGET_S:.0f} s, the rest "
            "at the next check-ins: its rows carry no step numbers, so it is read oldest first and this check-in is "
            "behind the run"
        )
    if blocks.overlong:
        notes.append(f"{rel}: an over-long line was read only in part")
    if blocks.nul:
        notes.append(f"{rel}: binary junk (NUL bytes) in the new bytes, not quoted")
    return notes


def _tracebacks_in(first: int, lines: list[int]) -> str:
    """What a skipped middle's traceback headers say, in words: where to look (its first ones and its last)."""
    if not lines:
        return ""
    numbers = [first + line for line in lines]
    where = ", ".join(str(n) for n in numbers) if len(numbers) <= 4 else f"{', '.join(map(str, numbers[:3]))}, ..., {numbers[-1]}"
    return f"; {len(numbers)} Python traceback(s) begin there, the rules did not see them (line(s) {where})"


def _size(n: int) -> str:
    return f"{n / (1 << 20):.0f} MB" if n >= 1 << 20 else f"{n} bytes"
