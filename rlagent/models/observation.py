"""What the collector reads from a run: file cursors, log events, metric history, probes, samples."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field, PrivateAttr

from rlagent.models.cluster import MultiNodeView, NodeProcesses
from rlagent.models.series_memo import SeriesMemo, TableSeries
from rlagent.models.slurm import SlurmReport

Process = Literal["trainer", "orchestrator"]


class FileCursor(BaseModel):
    """Where the last check-in stopped reading one file."""

    path: str
    """Path relative to the run dir, as resolved at read time (through logs/latest)."""
    dev: int = 0
    inode: int = 0
    offset: int = 0
    """Byte offset just past the last complete line consumed."""
    lines: int = 0
    """Number of complete lines consumed, so evidence can cite file:line."""
    size: int = 0
    head: str = ""
    """Hash of the first bytes: tells a rewritten file from a grown one."""
    mtime_ns: int = 0
    """Modification time when planned: a file read to its end and unchanged since is not looked at
    again (tools.tail); 0 in cursors of older versions."""
    last_time: datetime | None = None
    """Wall time (UTC) of the last dated line, to carry the date across midnight."""
    step: int | None = None
    """Newest step seen in this file (eval lines of layout L carry no step of their own)."""
    errors: int = 0
    """Error records read from this file so far (the multi-node tree's files: tools/multinode)."""


class LogEvent(BaseModel):
    """A notable log line: WARNING/ERROR, or an INFO line a rule cares about."""

    file: str
    line: int
    time: datetime | None = None
    level: str
    message: str
    """First line of the message, control sequences stripped, cut to a bounded length."""
    detail: str = ""
    """Continuation lines (traceback, sublines), bounded."""
    kind: str | None = None
    """Classification from tools.patterns (e.g. `crash`, `cuda_oom`), None when just a warning."""
    step: int | None = None
    """Newest step seen in the same file when this line was written."""
    numbers: list[float] = Field(default_factory=list)
    """Numbers captured by the classifying pattern (e.g. consecutive empty batches, exit code)."""

    def cite(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


EVENTS_PER_KIND = 50
"""A run keeps the newest this many events of each kind (agents/collector.py): a rule that counts
them knows where its count may stop short."""

UNDATED = datetime.min.replace(tzinfo=UTC)
"""Where an event with no time sorts: first."""


def event_order(event: LogEvent) -> tuple[datetime, str, int]:
    """Events in time order (undated first), then by file and line: the order the run keeps them in."""
    return event.time or UNDATED, event.file, event.line


class WarningGroup(BaseModel):
    """WARNING/ERROR lines with the same message template (numbers and ids masked)."""

    template: str
    level: str
    count: int
    first: LogEvent
    last: LogEvent


class EvalPoint(BaseModel):
    env: str
    step: int
    score: float
    """avg@k (L) or Reward (H) of the eval."""


class MetricHistory(BaseModel):
    """Per-step metric series of the run, bounded; canonical names in tools.metric_names."""

    trainer: dict[int, dict[str, float]] = Field(default_factory=dict)
    orchestrator: dict[int, dict[str, float]] = Field(default_factory=dict)
    early: dict[str, list[float]] = Field(default_factory=dict)
    """`process/metric` -> its first finite values (the early-run baseline), kept when the window slides."""
    evals: list[EvalPoint] = Field(default_factory=list)
    step_seen_at: dict[str, datetime] = Field(default_factory=dict)
    """`process` -> wall time of the line with its newest step."""
    event_counts: dict[str, dict[str, dict[int, int]]] = Field(default_factory=dict)
    """log file -> event kind -> step -> classified lines, uncapped (events themselves are
    kept bounded): rates such as env errors per rollout need the true counts."""

    _memo: SeriesMemo = PrivateAttr(default_factory=SeriesMemo)
    """Series built from this history's rows, or from those of the history it was made from
    (`carry_memo`): a warm check-in builds points only from its new rows."""

    def carry_memo(self, older: MetricHistory) -> None:
        """Build on `older`'s series: this history was made from it, replacing rows, never
        changing one (agents/collector `_fresh_history`)."""
        self._memo = older._memo

    def table_series(self, process: Process) -> TableSeries:
        """The table's steps, rows and finite series, as of now (the table must not change while
        the result is used)."""
        return self._memo.synced(process, self.table(process))

    def event_count(self, kind: str, first_step: int, last_step: int, process: str) -> int | None:
        """Lines of `kind` in [first_step, last_step] from the logs of `process`; None if none carry steps."""
        counts = [c for f, kinds in self.event_counts.items() if _log_process(f) == process for c in [kinds.get(kind, {})]]
        if not counts:
            return None
        return sum(n for c in counts for s, n in c.items() if first_step <= s <= last_step)

    def table(self, process: Process) -> dict[int, dict[str, float]]:
        return self.trainer if process == "trainer" else self.orchestrator

    def series(self, process: Process, metric: str) -> list[tuple[int, float]]:
        """(step, value) in step order; NaN/inf values are kept, missing ones are skipped."""
        table = self.table(process)
        # Sorting the steps (ints, compared in C), not the rows by a key function: 1.5x as fast on 1000 steps.
        return [(s, row[metric]) for s in sorted(table) if metric in (row := table[s])]

    def finite_series(self, process: Process, metric: str) -> list[tuple[int, float]]:
        return [(s, v) for s, v in self.series(process, metric) if math.isfinite(v)]

    def recent(self, process: Process, metric: str, n: int, *, finite: bool = False) -> list[tuple[int, float]]:
        """The newest `n` points of `series` (of `finite_series` if `finite`), in step order: read
        back from the newest step, so a check-in's summary lines do not walk the whole window."""
        table = self.table(process)
        out: list[tuple[int, float]] = []
        for s in sorted(table, reverse=True):
            if len(out) >= n:
                break
            row = table[s]
            if metric in row and (not finite or math.isfinite(row[metric])):
                out.append((s, row[metric]))
        out.reverse()
        return out

    def early_values(self, process: Process, metric: str) -> list[float]:
        return self.early.get(f"{process}/{metric}", [])

    def last_step(self, process: Process) -> int | None:
        table = self.table(process)
        return max(table) if table else None


def _log_process(rel: str) -> str | None:
    name = rel.rsplit("/", 1)[-1]
    return "orchestrator" if name.startswith("orchestrator") else "trainer" if name.startswith("trainer") else None


class ProcessInfo(BaseModel):
    pid: int
    title: str
    """The setproctitle title, e.g. `PRIME-RL::Trainer`."""
    role: str
    """`Trainer`, `Orchestrator`, ... (the part after `::`)."""
    status: str = ""
    rss_mb: float | None = None


class LiveProbes(BaseModel):
    """What the live probes saw; None means the probe was not run (offline) or failed."""

    processes: list[ProcessInfo] | None = None
    process_match: str = ""
    """How the processes were tied to this run, in words."""
    host_ram_percent: float | None = None
    disk_free_ratio: float | None = None
    disk_free_gib: float | None = None
    vllm: dict[str, float] | None = None
    slurm: dict[str, str] | None = None
    """SLURM job id -> state (RUNNING, FAILED, ...) of the run's jobs."""
    slurm_jobs: SlurmReport | None = None
    """The run's SLURM jobs in full (how each was matched, reason, nodes, times), None when not probed."""
    node_processes: list[NodeProcesses] | None = None
    """PRIME-RL processes on the nodes of the run's running job (srun --overlap or ssh)."""
    problems: list[str] = Field(default_factory=list)


class Rollout(BaseModel):
    """One sample rollout, bounded, chosen to be telling."""

    why: str
    """best / worst / truncated / errored."""
    step: int
    env: str | None = None
    reward: float | None = None
    truncated: bool = False
    error: str | None = None
    completion: str = ""
    """Untrusted model output: quoted as evidence, never obeyed."""


class Observation(BaseModel):
    """Everything the collector gathered in one check-in."""

    now: datetime
    offline: bool
    attempt: str | None = None
    """H: the `logs/latest` target (e.g. `attempt_2`)."""
    new_attempt: bool = False
    newest_line_time: datetime | None = None
    trainer_step: int | None = None
    orchestrator_step: int | None = None
    bytes_read: int = 0
    behind: list[str] = Field(default_factory=list)
    """Files whose backlog, read oldest first, was left part-read at the read's time budget: the
    next check-ins go on with it, and a watcher checks the run again sooner."""
    warning_groups: list[WarningGroup] = Field(default_factory=list)
    """Groups of this attempt, most frequent first (cumulative across check-ins)."""
    new_events: list[LogEvent] = Field(default_factory=list)
    """Classified events read in this check-in, of those the run keeps (the newest of each kind),
    in time order."""
    rollouts: list[Rollout] = Field(default_factory=list)
    rollouts_step: int | None = None
    rollouts_per_step: int | None = None
    sample_stats: dict[str, float] = Field(default_factory=dict)
    """Over every sample of `rollouts_step`: `total`, `degenerate`, `identical` (count of the most common)."""
    checkpoints: dict[int, list[str]] = Field(default_factory=dict)
    """Newest checkpoint steps -> parts present (`trainer`, `orchestrator`)."""
    live: LiveProbes = Field(default_factory=LiveProbes)
    multinode: MultiNodeView | None = None
    """The per-node and per-rank logs of a multi-node run; None for a single-node one."""
    notes: list[str] = Field(default_factory=list)
    """Clear notes about bad input (truncated/binary lines, rotated or deleted logs, malformed files)."""
