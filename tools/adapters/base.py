"""One interface per training framework: what the collector, the launcher and `diagnose` ask of a run.

An adapter recognises a run directory, reads its configs into a `RunConfig`, reads every source of
metrics and events incrementally (by byte offset, from the cursors the run's memory keeps) into
`FileRead`s under the canonical metric names the rules speak (tools/metric_names.py), picks telling
samples, lists checkpoints and says how the framework resumes. Adding a framework is one module with
one such class, registered in `rlagent.tools.adapters.ADAPTERS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Protocol

from rlagent.models.observation import EvalPoint, FileCursor, LogEvent, Rollout, WarningGroup
from rlagent.models.run import Framework, RunConfig, RunInfo


@dataclass
class StepRow:
    """One step's canonical metrics from one source."""

    process: str
    """`trainer` or `orchestrator` (which table of the history the values belong to)."""
    step: int
    values: dict[str, float]
    when: datetime | None = None


@dataclass
class FileRead:
    """What one source file added since its cursor."""

    rel: str
    cursor: FileCursor | None
    fresh: bool = False
    """Read again from the start (new, rotated, truncated or rewritten): its old events are dropped."""
    rows: list[StepRow] = field(default_factory=list)
    evals: list[EvalPoint] = field(default_factory=list)
    events: list[LogEvent] = field(default_factory=list)
    groups: dict[str, WarningGroup] = field(default_factory=dict)
    counts: dict[str, dict[int, int]] = field(default_factory=dict)
    """event kind -> step -> lines (uncapped)."""
    notes: list[str] = field(default_factory=list)
    bytes_read: int = 0
    under: bool = False
    """Values never overwrite a non-finite value already in the history (prime-rl's metrics.jsonl drops
    NaN, so the log stays the witness)."""
    rounded: bool = False
    """Its figures are printed to a few digits, and a fuller source holds the same steps (layout H's
    step lines beside metrics.jsonl): read on from its cursor, it never replaces a finite value the
    history has (the row, read at an earlier check-in than its step line)."""
    newest: datetime | None = None
    """Time of the newest record read (offline "now")."""
    times: dict[str, datetime] = field(default_factory=dict)
    """process -> time its newest step was written."""
    behind: bool = False
    """The read stopped at its time budget with bytes left (a backlog read oldest first): the next
    check-in goes on from its cursor, and a watcher checks the run again sooner (graph.adaptive)."""
    moved_from: str | None = None
    """The rest of a rotated log (tools.rotation), read under the name it has now: what was read of it
    before, under this name, is now in this file at the same line numbers."""


@dataclass
class RunRead:
    """Everything new in a run since the cursors."""

    files: list[FileRead] = field(default_factory=list)
    attempt: str | None = None
    """prime-rl layout H: the `logs/latest` target."""
    notes: list[str] = field(default_factory=list)


@dataclass
class Samples:
    key: str | None
    """Identity of the newest samples file (sampled again only when it changes)."""
    step: int | None = None
    count: int = 0
    rollouts: list[Rollout] = field(default_factory=list)
    """The telling few, kept in the run's memory."""
    notes: list[str] = field(default_factory=list)
    all: list[Rollout] = field(default_factory=list)
    """Every sample of the step (for the sample statistics; not kept)."""


@dataclass
class ResumePlan:
    """How to relaunch this run from a checkpoint: flags added to (or replacing flags of) the run's own
    launch command. `possible` False says why a resume cannot be built (nothing is proposed then)."""

    possible: bool
    step: int | None = None
    """Checkpoint step the run resumes from."""
    add: list[str] = field(default_factory=list)
    """Arguments appended to the launch command."""
    drop: list[str] = field(default_factory=list)
    """Flags (with their value) removed from the launch command first."""
    why: str = ""


class FrameworkAdapter(Protocol):
    framework: Framework

    def recognise(self, path: Path) -> int:
        """Evidence that `path` (a directory) is a run of this framework; 0 for none."""
        ...

    def discover(self, path: Path) -> RunInfo: ...

    def read_config(self, run_dir: Path) -> RunConfig: ...

    def read(self, run: RunInfo, cursors: dict[str, FileCursor], tz: tzinfo, *, keep_per_kind: int) -> RunRead:
        """Every source from its cursor: metric rows, evals, events, warning groups, notes."""
        ...

    def read_text(self, text: str, rel: str, run_dir: Path | None = None, resumed_from: int | None = None) -> FileRead:
        """A whole text (a pasted excerpt, one log file, or what a relaunch from checkpoint `resumed_from`
        appended to the log of the run in `run_dir`) read as a console log is."""
        ...

    def samples(self, run_dir: Path, known_key: str | None) -> Samples | None:
        """Telling samples of the newest step, or None when `known_key` is still the newest file."""
        ...

    def checkpoints(self, run_dir: Path, notes: list[str] | None = None) -> dict[int, list[str]]:
        """Newest checkpoint steps -> parts present (a complete one has every part); what cannot be
        looked at (an unreadable folder, a link loop) is added to `notes`."""
        ...

    def resume_plan(self, run_dir: Path, launch_argv: list[str]) -> ResumePlan: ...

    def process_markers(self, run: RunInfo) -> list[str]:
        """Strings a process's command line holds when it belongs to this run (output dir, experiment)."""
        ...
