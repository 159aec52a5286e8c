"""The graph state: what a run remembers between check-ins, and what one check-in produces.

`RunMemory` outlives a check-in (file cursors, the metric history, events, samples, dispatches, the
LLM log); the SQLite checkpointer is its store. `CheckinOutput` is made fresh for every check-in
(observation, findings, proposal, reviews, the entry), so nothing of the last one leaks into the
next. A new check-in's input is the run, its number, its gate and a fresh `CheckinOutput()`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from pydantic import BaseModel, Field

from rlagent.models.actions import DispatchRecord, Gate, LaunchCommand, LaunchOutcome, Proposal, Review
from rlagent.models.findings import Finding, FindingRecord
from rlagent.models.incidents import AlertContext
from rlagent.models.llm import LLMRecord
from rlagent.models.observation import FileCursor, LogEvent, MetricHistory, Observation, Rollout, WarningGroup
from rlagent.models.run import Health, RunConfig, RunInfo


class UnwrittenEntry(BaseModel):
    """A STATUS.md entry that could not be appended (a full disk): appended, in order, next time."""

    checkin: int
    marker: str
    text: str


class RunMemory(BaseModel):
    """What a run remembers between check-ins."""

    cursors: dict[str, FileCursor] = Field(default_factory=dict)
    history: MetricHistory = Field(default_factory=MetricHistory)
    events: list[LogEvent] = Field(default_factory=list)
    """Classified events kept across check-ins (bounded per kind)."""
    groups: dict[str, WarningGroup] = Field(default_factory=dict)
    """Warning groups of the current attempt, by template."""
    attempt: str | None = None
    config: RunConfig = Field(default_factory=RunConfig)
    remembered: dict[str, FindingRecord] = Field(default_factory=dict)
    """Findings reported by earlier check-ins, for persistence."""
    samples: list[Rollout] = Field(default_factory=list)
    """Telling rollouts of the newest step, kept while that file is unchanged."""
    samples_key: str | None = None
    samples_step: int | None = None
    samples_count: int = 0
    samples_stats: dict[str, float] = Field(default_factory=dict)
    rollout_stats_step: int = 0
    """Layout L: newest rollouts step whose truncation/error fractions are in the history."""
    processes_seen: list[str] = Field(default_factory=list)
    """Process roles seen in earlier live check-ins (the run's own expected set)."""
    launch_seen: LaunchCommand | None = None
    """The run's launch command as last found from its live processes (WANDB_ARGS); kept, because
    after a crash no process is left to read it from."""
    dispatches: list[DispatchRecord] = Field(default_factory=list)
    """Commands rlagent sent to this run (restart budget, loop detection)."""
    llm_log: list[LLMRecord] = Field(default_factory=list)
    """Every check-in's LLM record (bounded): the run's token history and the daily cost cap."""
    entry_marks: dict[str, str] = Field(default_factory=dict)
    """Finding id -> silence or acknowledgement mark, as in the last entry written to STATUS.md: a
    change is news for an offline re-check that read nothing new."""
    unwritten: list[UnwrittenEntry] = Field(default_factory=list)
    """Entries a failed write left out of STATUS.md, oldest first (bounded); retried before the next."""


class CheckinOutput(BaseModel):
    """What one check-in produces; a new check-in starts from an empty one."""

    observation: Observation | None = None
    findings: list[Finding] = Field(default_factory=list)
    health: Health | None = None
    proposal: Proposal | None = None
    """The typed action proposed this check-in (models/actions.py); None when nothing is."""
    proposal_notes: list[str] = Field(default_factory=list)
    """Why no action was proposed, or what a person could consider (never sent anywhere)."""
    reviews: list[Review] = Field(default_factory=list)
    """This check-in's review rounds (at most two: a proposal and one revision)."""
    launch: LaunchOutcome | None = None
    """This check-in's decision and what was sent, once the gate was passed or closed."""
    llm: LLMRecord | None = None
    """This check-in's use of Claude (status, tokens, cost, its notes); None before the diagnostician."""
    status_entry: str = ""
    written: bool = False
    write_error: str | None = None
    """Why STATUS.md could not be written (a full disk, no permission): a failure, said to the user."""
    write_note: str | None = None
    """Why an entry was not appended although writing was on (it is there already): said, not failed."""
    checked_at: datetime | None = None


class CheckinState(BaseModel):
    """The graph state, persisted per run (thread) by the SQLite checkpointer."""

    run: RunInfo
    checkin: int = 0
    """Sequence number of the check-in in progress (1 for the first); the entry id in STATUS.md."""
    gate: Gate = Field(default_factory=Gate)
    """Whether an agreed proposal is offered for a person's approval (set by the monitor)."""
    now_override: datetime | None = None
    """Offline check-ins only: the time of this check-in (a replay's schedule)."""
    alerts: AlertContext = Field(default_factory=AlertContext)
    """Silences and acknowledgements in force, for the entry's marks (set by the monitor)."""
    memory: RunMemory = Field(default_factory=RunMemory)
    out: CheckinOutput = Field(default_factory=CheckinOutput)


_OUT_FIELDS = frozenset(CheckinOutput.model_fields)
_MEMORY_FIELDS = frozenset(RunMemory.model_fields)


def update(state: CheckinState, changes: dict) -> dict[str, BaseModel]:
    """A node's update as whole typed values: each change goes to this check-in's output or to the
    run's memory, by field name (each top-level field of the state is one LangGraph channel, and
    nodes run in turn, so replacing the whole value is safe)."""
    unknown = set(changes) - _OUT_FIELDS - _MEMORY_FIELDS
    if unknown:
        raise KeyError(f"not a field of the check-in output or the run memory: {sorted(unknown)}")
    out = {k: v for k, v in changes.items() if k in _OUT_FIELDS}
    memory = {k: v for k, v in changes.items() if k in _MEMORY_FIELDS}
    result: dict[str, BaseModel] = {}
    if out:
        result["out"] = state.out.model_copy(update=out)
    if memory:
        result["memory"] = state.memory.model_copy(update=memory)
    return result


def applied(state: CheckinState, changes: dict) -> CheckinState:
    """The state as it will be after `changes` (for code that reads its own pending update)."""
    return state.model_copy(update=update(state, changes))


def typed_node(changes_of: Callable[[CheckinState], dict]) -> Callable[[CheckinState], dict[str, BaseModel]]:
    """A node from a function that says what it changes by field name: LangGraph gets whole typed
    values for `out` and `memory`."""

    def node(state: CheckinState) -> dict[str, BaseModel]:
        return update(state, changes_of(state))

    node.__name__ = getattr(changes_of, "__name__", "node")
    return node
