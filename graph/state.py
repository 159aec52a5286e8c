"""Typed state of a check-in: what the collector saw, what the rules found, what was written.

Every node returns a partial update of `CheckinState`. Fields that must outlive a single
check-in (file cursors, the metric history, earlier findings) live here too, so the SQLite
checkpointer is the run's state store: a new check-in on the same thread starts from them.
"""

from __future__ import annotations

import math
from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from rlagent.graph.actions import DispatchRecord, Gate, LaunchCommand, LaunchOutcome, Proposal, Review
from rlagent.tools.llm_budget import LLMRecord

Process = Literal["trainer", "orchestrator"]


class Layout(StrEnum):
    """The two prime-rl on-disk layouts (reference/prime-rl-formats.md)."""

    H = "H"  # Aug 2026: configs/*.json, logs/attempt_N, metrics.jsonl, traces.jsonl
    L = "L"  # May 2026: configs/*.toml, flat logs/, run_default/rollouts/*/train_rollouts.jsonl


class Health(StrEnum):
    HEALTHY = "Healthy"
    DEGRADED = "Degraded"
    DOWN = "Down"


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class Category(StrEnum):
    HEALTH = "health"
    PROGRESS = "progress"
    STABILITY = "stability"
    PERFORMANCE = "performance"


class RunInfo(BaseModel):
    """Which run is being watched."""

    run_dir: str
    """Absolute path of the run directory."""
    layout: Layout
    name: str
    """Run name: the basename of the run dir (H `run.name`)."""
    picked_from: str | None = None
    """When the user pointed at an output dir holding several runs: that dir (the newest run was taken)."""


class RunConfig(BaseModel):
    """The settings a monitor needs, read from the run's resolved configs."""

    max_steps: int | None = None
    model: str | None = None
    batch_size: int | None = None
    token_batch_size: int | None = None
    group_size: int | None = None
    """Rollouts per example (H `group_size`, L `rollouts_per_example`)."""
    max_completion_tokens: int | None = None
    seq_len: int | None = None
    ckpt_interval: int | None = None
    max_off_policy_steps: int | None = None
    temperature: float | None = None
    inference_url: str | None = None
    envs: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    """Config files read, relative to the run dir."""
    problems: list[str] = Field(default_factory=list)
    """Clear notes about configs that could not be read (malformed TOML/JSON, missing)."""


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
    last_time: datetime | None = None
    """Wall time (UTC) of the last dated line, to carry the date across midnight."""
    step: int | None = None
    """Newest step seen in this file (eval lines of layout L carry no step of their own)."""


class LogEvent(BaseModel):
    """A notable log line: WARNING/ERROR, or an INFO line a rule cares about."""

    file: str
    line: int
    time: datetime | None = None
    level: str
    message: str
    """First line of the message, ANSI-stripped, cut to a bounded length."""
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
        return sorted((s, row[metric]) for s, row in table.items() if metric in row)

    def finite_series(self, process: Process, metric: str) -> list[tuple[int, float]]:
        return [(s, v) for s, v in self.series(process, metric) if math.isfinite(v)]

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
    """SLURM job id -> state (RUNNING, FAILED, ...) for the run's `job_<id>.log` files."""
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
    warning_groups: list[WarningGroup] = Field(default_factory=list)
    """Groups of this attempt, most frequent first (cumulative across check-ins)."""
    new_events: list[LogEvent] = Field(default_factory=list)
    """Classified events read in this check-in."""
    rollouts: list[Rollout] = Field(default_factory=list)
    rollouts_step: int | None = None
    rollouts_per_step: int | None = None
    checkpoints: dict[int, list[str]] = Field(default_factory=dict)
    """Newest checkpoint steps -> parts present (`trainer`, `orchestrator`)."""
    live: LiveProbes = Field(default_factory=LiveProbes)
    notes: list[str] = Field(default_factory=list)
    """Clear notes about bad input (truncated/binary lines, rotated or deleted logs, malformed files)."""


class Finding(BaseModel):
    """One diagnosed condition; ids and thresholds are the public contract in findings.md."""

    id: str
    severity: Severity
    category: Category
    summary: str
    evidence: list[str] = Field(default_factory=list)
    """Exact log lines as `file:line: text`, or metric values as `metric @ step N = v`."""
    first_step: int | None = None
    last_step: int | None = None
    since: datetime | None = None
    """Check-in time when this finding was first reported and has persisted since."""
    checkins: int = 1
    """Consecutive check-ins that reported it."""
    source: Literal["rules", "llm"] = "rules"
    """Who found it: the rules, or Claude (with evidence rlagent checked on disk)."""


class FindingRecord(BaseModel):
    """A finding id as remembered between check-ins."""

    since: datetime
    checkins: int


class CheckinState(BaseModel):
    """The graph state. Persisted per run (thread) by the SQLite checkpointer."""

    run: RunInfo
    checkin: int = 0
    """Sequence number of the check-in in progress (1 for the first); the entry id in STATUS.md."""
    cursors: dict[str, FileCursor] = Field(default_factory=dict)
    history: MetricHistory = Field(default_factory=MetricHistory)
    events: list[LogEvent] = Field(default_factory=list)
    """Classified events kept across check-ins (bounded per kind)."""
    groups: dict[str, WarningGroup] = Field(default_factory=dict)
    """Warning groups of the current attempt, by template."""
    attempt: str | None = None
    config: RunConfig = Field(default_factory=RunConfig)
    observation: Observation | None = None
    findings: list[Finding] = Field(default_factory=list)
    health: Health | None = None
    remembered: dict[str, FindingRecord] = Field(default_factory=dict)
    """Findings reported by earlier check-ins, for persistence."""
    samples: list[Rollout] = Field(default_factory=list)
    """Telling rollouts of the newest step, kept while that file is unchanged."""
    samples_key: str | None = None
    samples_step: int | None = None
    samples_count: int = 0
    rollout_stats_step: int = 0
    """Layout L: newest rollouts step whose truncation/error fractions are in the history."""
    processes_seen: list[str] = Field(default_factory=list)
    """Process roles seen in earlier live check-ins (the run's own expected set)."""
    proposal: Proposal | None = None
    """The typed action proposed this check-in (graph/actions.py); None when nothing is."""
    proposal_notes: list[str] = Field(default_factory=list)
    """Why no action was proposed, or what a person could consider (never sent anywhere)."""
    reviews: list[Review] = Field(default_factory=list)
    """This check-in's review rounds (at most two: a proposal and one revision)."""
    gate: Gate = Field(default_factory=Gate)
    """Whether an agreed proposal is offered for a person's approval (set by the monitor)."""
    launch: LaunchOutcome | None = None
    """This check-in's decision and what was sent, once the gate was passed or closed."""
    launch_seen: LaunchCommand | None = None
    """The run's launch command as last found from its live processes (WANDB_ARGS); kept, because
    after a crash no process is left to read it from."""
    dispatches: list[DispatchRecord] = Field(default_factory=list)
    """Commands rlagent sent to this run (restart budget, loop detection)."""
    llm: LLMRecord | None = None
    """This check-in's use of Claude (status, tokens, cost, its notes); None before the diagnostician."""
    llm_log: list[LLMRecord] = Field(default_factory=list)
    """Every check-in's LLM record (bounded): the run's token history and the daily cost cap."""
    status_entry: str = ""
    written: bool = False
    now_override: datetime | None = None
    """Offline check-ins only: the time of this check-in (a replay's schedule)."""
    checked_at: datetime | None = None
