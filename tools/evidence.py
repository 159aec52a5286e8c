"""Read facts back from a run's files: one log line by its number, a metric at a step, the newest
step. The evidence auditor and the restart verification use these to check claims on disk
instead of trusting what an earlier read (or an LLM) said.

The step lines of a log are read from its first byte, by this module alone (never from what the
collector kept), and then, while the file is the same (device, inode, first bytes, no shorter),
only from where the last read stopped: a proposal that stands for many check-ins would otherwise
have its claims re-read from the start of a log of several GB at every one.
"""

from __future__ import annotations

import bisect
import math
import os
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rlagent.models.run import Layout
from rlagent.tools.layout import log_files, process_of
from rlagent.tools.loglines import clean, parse_head
from rlagent.tools.rollouts import l_step_fractions
from rlagent.tools.steplines import StepLine, parse_step_line
from rlagent.tools.tail import iter_complete_lines

KEPT_STEPS = 1024
"""Steps whose values an index keeps (the newest, as many as the history window); a claim about an
older step reads the file again. At most KEPT_INDEXES logs are indexed at once (about 1 MB each at most)."""
KEPT_INDEXES = 64
_HEAD = 256
_MARK_EVERY = 1 << 20
_PARTIAL = 1 << 20
"""Of an unterminated last line, the first MB is parsed (a step line is a few hundred bytes)."""


def inside(run_dir: Path, rel: str) -> Path | None:
    """`run_dir/rel` if it stays inside the run dir (a claim cannot point elsewhere)."""
    try:
        root = run_dir.resolve()
        path = (root / rel).resolve()
        return path if path.is_relative_to(root) and path.is_file() else None
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError in Python 3.11), an unreadable dir
        return None


def line_at(path: Path, number: int) -> str | None:
    """Line `number` (1-based), control sequences and rank prefix stripped; None past the end."""
    marks = _marked(path)
    first, start = marks.marks[bisect.bisect_right(marks.marks, (number, math.inf)) - 1] if marks and number >= 1 else (1, 0)
    try:
        with open(path, "rb") as f:
            f.seek(start)
            for index, raw in enumerate(f, first):
                if index == number:
                    return clean(raw)
    except OSError:
        return None
    return None


@dataclass
class _Seen:
    """A file as a read of it left it: its identity and how far it was read."""

    dev: int
    inode: int
    head: bytes
    offset: int = 0

    def same(self, st: os.stat_result, head: bytes) -> bool:
        """Still the file read before, grown or not (not replaced, shrunk or rewritten at its start)."""
        return (self.dev, self.inode) == (st.st_dev, st.st_ino) and st.st_size >= self.offset and head.startswith(self.head)


def _look(path: Path) -> tuple[os.stat_result, bytes]:
    st = os.stat(path)
    with open(path, "rb") as f:
        return st, f.read(_HEAD)


@dataclass
class _Marks(_Seen):
    """(line number, byte offset) of the first line starting in each MB of the file up to `offset`."""

    lines: int = 0
    """Newlines before `offset`."""
    marks: list[tuple[int, int]] = field(default_factory=lambda: [(1, 0)])


_MARKS: OrderedDict[str, _Marks] = OrderedDict()


def _marked(path: Path) -> _Marks | None:
    """Line marks of `path` brought up to date (newlines counted a MB at a time, in C)."""
    key = str(path)
    try:
        st, head = _look(path)
        known = _MARKS.get(key)
        if known is None or not known.same(st, head):
            known = _Marks(dev=st.st_dev, inode=st.st_ino, head=head)
        with open(path, "rb") as f:
            f.seek(known.offset)
            while known.offset < st.st_size:
                data = f.read(min(_MARK_EVERY, st.st_size - known.offset))
                if not data:
                    break
                cut = data.find(b"\n")
                if cut != -1 and cut + 1 < len(data):
                    known.marks.append((known.lines + 2, known.offset + cut + 1))
                known.lines += data.count(b"\n")
                known.offset += len(data)
        known.head = head if len(known.head) < _HEAD else known.head
    except OSError:
        _MARKS.pop(key, None)
        return None
    _keep(_MARKS, key, known)
    return known


def _keep(cache: OrderedDict, key, value) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > KEPT_INDEXES:
        cache.popitem(last=False)


def step_lines(path: Path, process: str, start: int = 0) -> Iterator[StepLine]:
    """Step lines of one process's log, from byte offset `start`."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            for raw in f:
                line = _step_line(raw, process)
                if line is not None:
                    yield line
    except OSError:
        return


def _step_line(raw: bytes, process: str) -> StepLine | None:
    head = parse_head(clean(raw))
    if head is None:
        return None
    line = parse_step_line(head.message, process)
    return line if line is not None and line.process == process else None


@dataclass
class _Index(_Seen):
    """What the complete lines of one process's log said, up to `offset`."""

    lines: int = 0
    """Lines before `offset`."""
    newest: int | None = None
    """The highest step of any step line."""
    values: dict[int, dict[str, float]] = field(default_factory=dict)
    """Step -> metric -> value of the last line of that step giving it, for the newest KEPT_STEPS steps."""
    sites: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    """Step -> (line number, byte offset) of each of its step lines, for the steps `values` keeps."""
    dropped_below: int | None = None
    """Steps below this were let go of `values`."""

    def add(self, line: StepLine, number: int, offset: int) -> None:
        self.newest = line.step if self.newest is None else max(self.newest, line.step)
        self.values.setdefault(line.step, {}).update(line.values)
        self.sites.setdefault(line.step, []).append((number, offset))
        if len(self.values) > KEPT_STEPS:
            oldest = min(self.values)
            del self.values[oldest], self.sites[oldest]
            self.dropped_below = max(self.dropped_below or oldest + 1, oldest + 1)

    def keeps(self, step: int) -> bool:
        return self.dropped_below is None or step >= self.dropped_below


_INDEXES: OrderedDict[tuple[str, str], _Index] = OrderedDict()


def _indexed(path: Path, process: str) -> tuple[_Index, list[tuple[StepLine, str]]] | None:
    """The index of `path` brought up to date, and the step line of an unterminated last line (a
    line being written, or the last words of a process that died mid-line: counted, not kept),
    with its text."""
    key = (str(path), process)
    try:
        st, head = _look(path)
        index = _INDEXES.get(key)
        if index is None or not index.same(st, head):
            index = _Index(dev=st.st_dev, inode=st.st_ino, head=head)  # new, replaced, shrunk or rewritten
        for offset, raw in iter_complete_lines(path, index.offset, st.st_size):
            index.lines += 1
            line = _step_line(raw, process)
            if line is not None:
                index.add(line, index.lines, index.offset)
            index.offset = offset
        if len(index.head) < _HEAD:
            index.head = head
        partial: list[tuple[StepLine, str]] = []
        if st.st_size > index.offset:
            with open(path, "rb") as f:
                f.seek(index.offset)
                raw = f.read(min(st.st_size - index.offset, _PARTIAL))
            line = _step_line(raw, process)
            partial = [(line, clean(raw))] if line is not None else []
    except OSError:
        _INDEXES.pop(key, None)
        return None
    _keep(_INDEXES, key, index)
    return index, partial


def process_logs(run_dir: Path, layout: Layout, process: str) -> list[Path]:
    return [p for p in log_files(run_dir, layout) if process_of(str(p.relative_to(run_dir))) == process]


def metric_on_disk(run_dir: Path, layout: Layout, process: str, metric: str, step: int) -> float | None:
    """The value a step line of the current logs gives (L truncation/error: the rollouts file)."""
    found: float | None = None
    for path in process_logs(run_dir, layout, process):
        indexed = _indexed(path, process)
        if indexed is not None and indexed[0].keeps(step):
            index, partial = indexed
            lines = [StepLine(step=step, process=process, values=index.values.get(step, {})), *(line for line, _ in partial)]
        else:  # unreadable now, or a step older than the index keeps: the whole file, as it is now
            lines = list(step_lines(path, process))
        for line in lines:
            if line.step == step and metric in line.values:
                found = line.values[metric]
    if found is None and layout is Layout.L and metric in ("truncation", "error"):
        found = l_step_fractions(run_dir, step - 1).get(step, {}).get(metric)
    return found


def step_line_texts(path: Path, process: str, step: int) -> list[tuple[int, str]]:
    """(line number, text) of each of the process's step lines for `step` in one log, as reading
    the whole file now finds them: by the index's sites while it keeps the step (a line found there
    that is no longer that step line, the file changing meanwhile, sends it to the whole read)."""
    indexed = _indexed(path, process)
    if indexed is not None and indexed[0].keeps(step):
        index, partial = indexed
        found: list[tuple[int, str]] = []
        try:
            with open(path, "rb") as f:
                for number, offset in index.sites.get(step, ()):
                    f.seek(offset)
                    raw = f.readline(_PARTIAL)
                    line = _step_line(raw, process)
                    if line is None or line.step != step:
                        break
                    found.append((number, clean(raw)))
                else:
                    return found + [(index.lines + 1, text) for line, text in partial if line.step == step]
        except OSError:
            pass
    return _whole_file_texts(path, process, step)


def _whole_file_texts(path: Path, process: str, step: int) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    try:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                line = _step_line(raw, process)
                if line is not None and line.step == step:
                    found.append((number, clean(raw)))
    except OSError:
        return []
    return found


def newest_step(path: Path, process: str, start: int = 0) -> int | None:
    """The highest step of the step lines from byte `start` on."""
    indexed = _indexed(path, process) if start == 0 else None
    if indexed is not None:
        index, partial = indexed
        steps = [s for s in (index.newest, *(line.step for line, _ in partial)) if s is not None]
    else:
        steps = [line.step for line in step_lines(path, process, start)]
    return max(steps) if steps else None


def same_value(a: float, b: float, rel: float = 1e-3) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12) + 1e-9
