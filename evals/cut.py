"""Present a fixture's run (simulated) exactly as it was at a moment t, and grow it forward in time.

A replay must show the monitor what a live run showed it: every file as long as it was then,
with the mtime it had then, appended to (never rewritten) between check-ins so that incremental
reading by byte offsets runs as it does live. So each file of the recording is indexed once:

- a log is cut line by line on the time the line carries (`HH:MM:SS`, dated the way the monitor
  dates it: anchored at the file's recorded mtime, midnight rollovers counted walking back);
  a line without a time of its own (traceback, `╰─` sub-line, uvicorn request, binary junk)
  belongs to the record above it and appears with it;
- `metrics.jsonl` is cut row by row on each row's `time` (a torn row goes with the row above);
- any other file (configs, checkpoints, rollouts) appears whole once its recorded mtime is past.

A file is a prefix at every moment: it is cut before the first record newer than t, so a record
written out of order is held back until everything above it is in. The mtime of a cut file is the
time of its last record kept. Renamed (rotated) logs live under their old name until their
rotation time; symlinks (`logs/latest`) follow their recorded history.
"""

from __future__ import annotations

import bisect
import json
import os
import re
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path

from rlagent.evals.manifest import FileEntry, Manifest, ManifestError
from rlagent.tools.dayclock import date_points
from rlagent.tools.layout import process_of
from rlagent.tools.loglines import clean, parse_head

_STEP = re.compile(r"^Step (\d+) \|")


@dataclass(frozen=True)
class StepSeen:
    time: float
    process: str
    step: int


@dataclass
class FileIndex:
    """One recorded file: where each record ends and when it was written (running maximum)."""

    rel: str
    entry: FileEntry
    size: int
    ends: list[int] = field(default_factory=list)
    reach: list[float] = field(default_factory=list)
    """Running maximum of the record times: the file at t holds the records with reach <= t."""

    @property
    def mtime(self) -> float:
        return self.entry.mtime.timestamp()

    def extent(self, t: float) -> tuple[int, float] | None:
        """(bytes, mtime) of the file at time t, or None while it does not exist yet."""
        if self.entry.kind == "file":
            return (self.size, self.mtime) if self.mtime <= t else None
        kept = bisect.bisect_right(self.reach, t)
        return (self.ends[kept - 1], self.reach[kept - 1]) if kept else None

    def path_at(self, t: float) -> str:
        """Where the file lived at t: a rotated log sat under its old name until its rotation."""
        renamed_at = self.entry.renamed_at
        if self.entry.renamed_from is not None and renamed_at is not None and t < renamed_at.timestamp():
            return self.entry.renamed_from
        return self.rel

    @property
    def first(self) -> float:
        return self.reach[0] if self.reach else self.mtime


def _split(data: bytes) -> list[tuple[int, bytes]]:
    """(end offset, raw line without newline) per line; a last line without newline counts."""
    out, start = [], 0
    while start < len(data):
        stop = data.find(b"\n", start)
        end = len(data) if stop == -1 else stop + 1
        out.append((end, data[start : stop if stop != -1 else len(data)]))
        start = end
    return out


def _fill(times: list[float | None], fallback: float) -> list[float]:
    """Records without a time of their own take the time of the record above (leading ones the
    first known time; a file with none at all its mtime)."""
    known = next((t for t in times if t is not None), fallback)
    out = []
    for t in times:
        known = t if t is not None else known
        out.append(known)
    return out


def _running_max(times: list[float]) -> list[float]:
    out, top = [], float("-inf")
    for t in times:
        top = max(top, t)
        out.append(top)
    return out


def index_log(rel: str, entry: FileEntry, data: bytes, tz: tzinfo, steps: list[StepSeen]) -> FileIndex:
    lines = _split(data)
    heads = [parse_head(clean(raw)) if b"\x00" not in raw else None for _, raw in lines]
    points = [(n, h.seconds) for n, h in enumerate(heads, start=1) if h is not None]
    dated = date_points(points, previous=None, mtime=entry.mtime.timestamp(), tz=tz)
    times: list[float | None] = [dated[n].timestamp() if n in dated else None for n in range(1, len(lines) + 1)]
    process = process_of(rel)
    if process in ("trainer", "orchestrator"):
        for head, when in zip(heads, times, strict=True):
            if head is not None and when is not None and (m := _STEP.match(head.message)):
                steps.append(StepSeen(when, process, int(m.group(1))))
    filled = _fill(times, entry.mtime.timestamp())
    return FileIndex(rel, entry, len(data), [end for end, _ in lines], _running_max(filled))


def index_jsonl(rel: str, entry: FileEntry, data: bytes) -> FileIndex:
    lines = _split(data)
    times: list[float | None] = []
    for _, raw in lines:
        try:
            row = json.loads(raw)
            stamp = row.get("time") if isinstance(row, dict) else None
            times.append(float(stamp) if isinstance(stamp, int | float) and not isinstance(stamp, bool) else None)
        except ValueError:
            times.append(None)
    filled = _fill(times, entry.mtime.timestamp())
    return FileIndex(rel, entry, len(data), [end for end, _ in lines], _running_max(filled))


class RecordedRun:
    """The index of a fixture's run: what every file held at any moment."""

    def __init__(self, run_dir: Path, manifest: Manifest, tz: tzinfo) -> None:
        self.dir = run_dir
        self.manifest = manifest
        self.files: dict[str, FileIndex] = {}
        self.steps: list[StepSeen] = []
        for rel, entry in manifest.files.items():
            data = (run_dir / rel).read_bytes()
            if entry.kind == "log":
                self.files[rel] = index_log(rel, entry, data, tz, self.steps)
            elif entry.kind == "jsonl":
                self.files[rel] = index_jsonl(rel, entry, data)
            else:
                self.files[rel] = FileIndex(rel, entry, len(data))
        self.steps.sort(key=lambda s: s.time)
        self._check_renames()

    def _check_renames(self) -> None:
        for index in self.files.values():
            old, at = index.entry.renamed_from, index.entry.renamed_at
            if old is None or at is None:
                continue
            successor = self.files.get(old)
            if successor is not None and successor.first < at.timestamp():
                raise ManifestError(f"{old} has lines older than the rotation of {index.rel} into its place")

    @property
    def start(self) -> float:
        return min((f.first for f in self.files.values()), default=0.0)

    @property
    def end(self) -> float:
        """The newest moment of the recording (its last line, row or file)."""
        return max((f.mtime for f in self.files.values()), default=0.0)

    def step_time(self, step: int, process: str | None = "trainer") -> float | None:
        """When `process` (any, if None) first logged step `step` or a later one."""
        for seen in self.steps:
            if seen.step >= step and (process is None or seen.process == process):
                return seen.time
        return None

    def last_step(self, process: str = "trainer") -> int | None:
        steps = [s.step for s in self.steps if s.process == process]
        return max(steps) if steps else None

    def link_at(self, rel: str, t: float) -> str | None:
        target = None
        for state in self.manifest.symlinks.get(rel, []):
            if state.at.timestamp() <= t:
                target = state.target
        return target


class WorkingCopy:
    """A directory that becomes the fixture's run as it was at t, grown forward in time.

    Bytes are only ever appended, files only ever created or renamed (a rotation), so a monitor
    reading it between two `grow` calls sees what it would have seen live.
    """

    def __init__(self, run: RecordedRun, root: Path) -> None:
        self.run = run
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.t: float | None = None
        self._written: dict[str, int] = {}
        self._where: dict[str, str] = {}

    def grow(self, t: float) -> None:
        if self.t is not None and t < self.t:
            raise ValueError("a working copy only grows forward in time")
        self.t = t
        for rel in self.run.manifest.symlinks:
            self._link(rel, t)
        for rel, index in self.run.files.items():  # rotations first: the new file takes the old name
            where = self._where.get(rel)
            if where is not None and where != index.path_at(t):
                self._append(index, t)
                os.replace(self.root / where, self.root / index.path_at(t))
                self._where[rel] = index.path_at(t)
        for index in self.run.files.values():
            self._append(index, t)

    def _append(self, index: FileIndex, t: float) -> None:
        extent = index.extent(t)
        if extent is None:
            return
        size, mtime = extent
        done = self._written.get(index.rel)
        if done is not None and done >= size:
            return
        where = self._where.setdefault(index.rel, index.path_at(t))
        target = self.root / where
        target.parent.mkdir(parents=True, exist_ok=True)
        start = done or 0
        with open(self.run.dir / index.rel, "rb") as src:
            src.seek(start)
            chunk = src.read(size - start)
        with open(target, "ab") as dst:
            dst.write(chunk)
        self._written[index.rel] = size
        os.utime(target, (mtime, mtime))

    def _link(self, rel: str, t: float) -> None:
        target = self.run.link_at(rel, t)
        path = self.root / rel
        if target is None or (path.is_symlink() and os.readlink(path) == target):
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / target).mkdir(parents=True, exist_ok=True)  # the launcher makes the dir, then the link
        if path.is_symlink():
            path.unlink()
        os.symlink(target, path)


def cut(run: RecordedRun, root: Path, t: float) -> WorkingCopy:
    """The fixture's run as it was at t, in a new directory `root`."""
    copy = WorkingCopy(run, root)
    copy.grow(t)
    return copy
