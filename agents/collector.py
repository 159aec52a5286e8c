"""Collector node: gathers one check-in's `Observation` and folds what is new into the run's history.

Every file is read from where the last check-in stopped. Live probes (processes, RAM, disk,
vLLM, SLURM) are skipped offline. Bad input becomes notes; nothing here raises on a bad file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path

from rlagent.models.cluster import MultiNodeView
from rlagent.models.observation import (
    EvalPoint,
    FileCursor,
    LiveProbes,
    LogEvent,
    MetricHistory,
    Observation,
    Rollout,
    WarningGroup,
)
from rlagent.models.run import Layout
from rlagent.models.state import CheckinState, typed_node
from rlagent.tools import hostprobes, multinode
from rlagent.tools.checkpoints import checkpoint_parts
from rlagent.tools.clock import Clock, SystemClock
from rlagent.tools.configs import read_run_config
from rlagent.tools.layout import current_attempt, log_files
from rlagent.tools.logread import LogRead, read_log
from rlagent.tools.metrics_jsonl import REL as METRICS_REL
from rlagent.tools.metrics_jsonl import read_metrics
from rlagent.tools.processes import ProcessProbe, SystemProcesses
from rlagent.tools.rollouts import l_step_fractions, sample_key, sample_rollouts
from rlagent.tools.slurm_probe import ClusterProbe, SystemCluster

HISTORY_STEPS = 1000
"""Steps of each series kept in the state store (rules look back far less)."""
EARLY_VALUES = 10
"""First finite values kept per series as the run's early baseline."""
EVENTS_PER_KIND = 50
MAX_GROUPS = 200
MAX_EVALS = 300


@dataclass(frozen=True)
class CollectorDeps:
    offline: bool
    tz: tzinfo
    clock: Clock = field(default_factory=SystemClock)
    """Wall clock for live check-ins (injected so tests and replays can fix it)."""
    probe_timeout_s: float = 2.0
    processes: ProcessProbe = field(default_factory=SystemProcesses)
    host: hostprobes.HostProbe = field(default_factory=hostprobes.SystemHost)
    http_get: hostprobes.HttpGet = hostprobes.urllib_get
    """How vLLM's `/metrics` is fetched."""
    cluster: ClusterProbe = field(default_factory=SystemCluster)
    """The run's SLURM jobs and the processes on their nodes (tools.slurm_probe)."""


def make_collector(deps: CollectorDeps) -> Callable[[CheckinState], dict]:
    def collector(state: CheckinState) -> dict:
        return collect(state, deps)

    return typed_node(collector)


def collect(state: CheckinState, deps: CollectorDeps) -> dict:
    run_dir = Path(state.run.run_dir)
    notes: list[str] = []
    if not run_dir.is_dir():
        notes.append(f"{run_dir}: the run directory is gone")
    config = read_run_config(run_dir, state.run.layout)
    notes += config.problems

    attempt = current_attempt(run_dir) if state.run.layout is Layout.H else None
    new_attempt = state.memory.attempt is not None and attempt is not None and attempt != state.memory.attempt
    if new_attempt:
        notes.append(f"new attempt {attempt} (was {state.memory.attempt}): the run was restarted or resumed")

    reading = _Reading(
        history=_fresh_history(state.memory.history),
        groups={} if new_attempt else dict(state.memory.groups),
        events=list(state.memory.events),
        notes=notes,
    )
    _read_logs(reading, state, run_dir, attempt, deps.tz)
    tree = _read_tree(reading, state, run_dir, deps.tz)
    _read_metrics_jsonl(reading, run_dir, state.memory.cursors.get(METRICS_REL))
    rollout_stats_step = _read_l_rollout_stats(reading.history, state, run_dir)
    history, newest = reading.history, reading.newest
    _refresh_early(history)
    _trim(history)
    events = _bounded_events(reading.events + reading.new_events)
    key, rollout_step, rollouts_per_step, rollouts = _samples(state, run_dir, notes)

    if deps.offline:
        now = state.now_override or newest or deps.clock.now()
        live = LiveProbes()
    else:
        now = deps.clock.now()
        live = probe_live(run_dir, state.run.name, config.inference_url, deps)
        notes += live.problems

    if _nothing_readable(config, history, reading):
        notes.append(NOTHING_READ + ": no config, log line or metric row of the run parses, so its health cannot be judged")
    roles_seen = sorted(set(state.memory.processes_seen) | {p.role for p in live.processes or []})
    observation = Observation(
        now=now,
        offline=deps.offline,
        attempt=attempt,
        new_attempt=new_attempt,
        newest_line_time=newest,
        trainer_step=history.last_step("trainer"),
        orchestrator_step=history.last_step("orchestrator"),
        bytes_read=reading.bytes_read,
        warning_groups=merged_groups(reading.groups),
        new_events=reading.new_events[-200:],
        rollouts=rollouts,
        rollouts_step=rollout_step,
        rollouts_per_step=rollouts_per_step or None,
        checkpoints=checkpoint_parts(run_dir, state.run.layout),
        live=live,
        multinode=tree,
        notes=notes,
    )
    return {
        "config": config,
        "attempt": attempt or state.memory.attempt,
        "cursors": reading.cursors,
        "history": history,
        "events": events,
        "groups": reading.groups,
        "observation": observation,
        "processes_seen": roles_seen,
        "rollout_stats_step": rollout_stats_step,
        "samples": rollouts,
        "samples_key": key,
        "samples_step": rollout_step,
        "samples_count": rollouts_per_step,
    }


NOTHING_READ = "nothing could be read"
"""The note of a run whose files are all unreadable (the diagnostician then never says Healthy)."""


def _nothing_readable(config, history: MetricHistory, reading: _Reading) -> bool:
    """Files were there (bytes read, or configs that fail to parse) but not one step, eval,
    log event or config value came out of them."""
    something_there = reading.bytes_read > 0 or bool(config.problems)
    read_nothing = (
        not history.trainer
        and not history.orchestrator
        and not history.evals
        and not reading.events
        and not reading.new_events
        and not reading.groups
        and config.max_steps is None
        and config.model is None
    )
    return something_there and read_nothing


@dataclass
class _Reading:
    """What this check-in's reads add up to: the logs, metrics.jsonl, L's rollouts files."""

    history: MetricHistory
    groups: dict[str, WarningGroup]
    events: list[LogEvent]
    """The run's remembered events (minus those of a log read afresh)."""
    notes: list[str]
    cursors: dict[str, FileCursor] = field(default_factory=dict)
    new_events: list[LogEvent] = field(default_factory=list)
    bytes_read: int = 0
    newest: datetime | None = None
    """Time of the newest line read (the check-in's "now" offline)."""

    def saw(self, when: datetime) -> None:
        if self.newest is None or when > self.newest:
            self.newest = when


def _read_logs(reading: _Reading, state: CheckinState, run_dir: Path, attempt: str | None, tz: tzinfo) -> None:
    """Every log file from its cursor: steps, evals, events and warning groups into `reading`."""
    history, groups = reading.history, reading.groups
    for path in log_files(run_dir, state.run.layout):
        rel = str(path.relative_to(run_dir))
        read = read_log(path, rel, state.memory.cursors.get(rel), tz, keep_per_kind=EVENTS_PER_KIND)
        reading.notes += read.notes
        if read.cursor is not None:
            reading.cursors[rel] = read.cursor
            if read.cursor.last_time:
                reading.saw(read.cursor.last_time)
        reading.bytes_read += read.bytes_read
        if read.fresh:
            reading.events = [e for e in reading.events if e.file != rel]
            groups = reading.groups = {k: g for k, g in groups.items() if g.first.file != rel}
        if attempt is not None and rel.startswith(f"logs/{attempt}/") and state.memory.cursors.get(rel) is None:
            _drop_abandoned_steps(history, read)
        _merge_steps(history, read)
        _merge_counts(history, rel, read.step_counts, fresh=read.fresh)
        _merge_evals(history, [EvalPoint(env=e.env, step=e.step, score=e.score) for e in read.evals if e.step is not None])
        reading.new_events += read.events
        _merge_groups(groups, rel, read.groups)
    for rel, cursor in state.memory.cursors.items():
        if rel not in reading.cursors and rel != METRICS_REL and Path(run_dir, rel).exists() and attempt is None:
            reading.cursors[rel] = cursor  # a file not listed this time but still there (kept for L)


def _read_tree(reading: _Reading, state: CheckinState, run_dir: Path, tz: tzinfo) -> MultiNodeView | None:
    """The per-node and per-rank logs of a multi-node run (tools.multinode), bounded."""
    tree = multinode.read_tree(run_dir, state.run.layout, state.memory.cursors, tz)
    reading.notes += tree.notes
    reading.cursors.update(tree.cursors)
    reading.new_events += tree.events
    if tree.view is not None:
        reading.bytes_read += tree.view.bytes_read
        for cursor in tree.cursors.values():
            if cursor.last_time:
                reading.saw(cursor.last_time)
    return tree.view


def _read_metrics_jsonl(reading: _Reading, run_dir: Path, cursor: FileCursor | None) -> None:
    """metrics.jsonl from its cursor, merged under the log's values: a NaN the log showed stays
    (prime-rl drops NaN from the JSONL, so the log is the witness)."""
    metrics = read_metrics(run_dir, cursor)
    reading.notes += metrics.notes
    if metrics.cursor is None:
        return
    history = reading.history
    reading.cursors[METRICS_REL] = metrics.cursor
    reading.bytes_read += metrics.bytes_read
    for process, table in (("trainer", metrics.trainer), ("orchestrator", metrics.orchestrator)):
        target = history.table(process)  # type: ignore[arg-type]
        for step, values in table.items():
            row = target.get(step, {})
            _update_row(target, step, {k: v for k, v in values.items() if not (k in row and not math.isfinite(row[k]))})
    _merge_evals(history, metrics.evals)
    for process, stamp in metrics.times.items():
        seen = datetime.fromtimestamp(stamp, UTC)
        if process not in history.step_seen_at or seen > history.step_seen_at[process]:
            history.step_seen_at[process] = seen
        reading.saw(seen)


def _read_l_rollout_stats(history: MetricHistory, state: CheckinState, run_dir: Path) -> int:
    """Layout L: truncation, error and trainable fractions from the rollouts files (its logs have
    none); the newest step read so far, whose file may still grow and is read again next time."""
    if state.run.layout is not Layout.L:
        return state.memory.rollout_stats_step
    fractions = l_step_fractions(run_dir, max(0, state.memory.rollout_stats_step - 1))
    for step, values in fractions.items():
        _update_row(history.orchestrator, step, values)
    return max([state.memory.rollout_stats_step, *fractions])


def _samples(state: CheckinState, run_dir: Path, notes: list[str]) -> tuple[str | None, int | None, int, list[Rollout]]:
    """(identity of the newest rollouts file, its step, rollouts in it, telling samples): sampled
    again only when that file changed."""
    key = sample_key(run_dir, state.run.layout)
    memory = state.memory
    if key is not None and key == memory.samples_key:
        return key, memory.samples_step, memory.samples_count, memory.samples
    step, count, rollouts, rollout_notes = sample_rollouts(run_dir, state.run.layout)
    notes += rollout_notes
    return key, step, count, rollouts


def _fresh_history(old: MetricHistory) -> MetricHistory:
    """A copy to update without touching the input state: outer containers are copied and rows
    are replaced, never mutated (a deep copy of a long history costs more than the whole read)."""
    return MetricHistory.model_construct(
        trainer=dict(old.trainer),
        orchestrator=dict(old.orchestrator),
        early=dict(old.early),
        evals=list(old.evals),
        step_seen_at=dict(old.step_seen_at),
        event_counts=dict(old.event_counts),
    )


def _update_row(table: dict[int, dict[str, float]], step: int, values: dict[str, float]) -> None:
    table[step] = {**table.get(step, {}), **values}


def _drop_abandoned_steps(history: MetricHistory, read: LogRead) -> None:
    """A log of the newest attempt, read for the first time: a resumed run goes on from its
    checkpoint, so the steps an earlier attempt logged from there on are no longer the run's (its
    step is the newest attempt's, and its metrics are the resumed ones)."""
    firsts: dict[str, int] = {}
    for line, _ in read.steps:
        firsts[line.process] = min(firsts.get(line.process, line.step), line.step)
    for process, first in firsts.items():
        table = history.table(process)  # type: ignore[arg-type]
        for step in [s for s in table if s >= first]:
            del table[step]


def _merge_steps(history: MetricHistory, read: LogRead) -> None:
    for line, when in read.steps:
        _update_row(history.table(line.process), line.step, line.values)  # type: ignore[arg-type]
        if when is not None:
            seen = history.step_seen_at.get(line.process)
            if seen is None or when > seen:
                history.step_seen_at[line.process] = when


def _merge_counts(history: MetricHistory, rel: str, counts: dict[str, dict[int, int]], *, fresh: bool) -> None:
    """Add one file's per-step event counts (a file read again from the start replaces its own)."""
    if not counts and not fresh:
        return
    merged = {} if fresh else {kind: dict(steps) for kind, steps in history.event_counts.get(rel, {}).items()}
    for kind, steps in counts.items():
        target = merged.setdefault(kind, {})
        for step, n in steps.items():
            target[step] = target.get(step, 0) + n
        if len(target) > HISTORY_STEPS:
            merged[kind] = dict(sorted(target.items())[-HISTORY_STEPS:])
    history.event_counts = {**history.event_counts, rel: merged}


def _merge_evals(history: MetricHistory, points: list[EvalPoint]) -> None:
    if not points:
        return
    index = {(p.env, p.step): i for i, p in enumerate(history.evals)}
    for point in points:
        if (point.env, point.step) in index:
            history.evals[index[(point.env, point.step)]] = point
        else:
            index[(point.env, point.step)] = len(history.evals)
            history.evals.append(point)
    history.evals = sorted(history.evals, key=lambda p: (p.step, p.env))[-MAX_EVALS:]


def _refresh_early(history: MetricHistory) -> None:
    """Fill the early baseline from the first steps, until it has EARLY_VALUES per series."""
    for process in ("trainer", "orchestrator"):
        table = history.table(process)  # type: ignore[arg-type]
        if not table:
            continue
        metrics = {name for row in table.values() for name in row}
        for name in metrics:
            key = f"{process}/{name}"
            if len(history.early.get(key, [])) >= EARLY_VALUES:
                continue
            values = [v for _, v in history.finite_series(process, name)[:EARLY_VALUES]]  # type: ignore[arg-type]
            if values:
                history.early[key] = values


def _trim(history: MetricHistory) -> None:
    for table in (history.trainer, history.orchestrator):
        if len(table) > HISTORY_STEPS:
            for step in sorted(table)[: len(table) - HISTORY_STEPS]:
                del table[step]


def _bounded_events(events: list[LogEvent]) -> list[LogEvent]:
    seen: set[tuple[str, int, str | None]] = set()
    per_kind: dict[str | None, list[LogEvent]] = {}
    for event in events:
        key = (event.file, event.line, event.kind)
        if key in seen:
            continue
        seen.add(key)
        per_kind.setdefault(event.kind, []).append(event)
    kept = [e for bucket in per_kind.values() for e in bucket[-EVENTS_PER_KIND:]]
    return sorted(kept, key=lambda e: (e.time or datetime.min.replace(tzinfo=UTC), e.file, e.line))


def _merge_groups(groups: dict[str, WarningGroup], rel: str, new: dict[str, WarningGroup]) -> None:
    """Add one file's freshly read groups to the attempt's groups (keyed by file and template)."""
    for template, group in new.items():
        key = f"{rel}\x00{template}"
        known = groups.get(key)
        if known is None:
            if len(groups) < MAX_GROUPS:
                groups[key] = group
        else:
            groups[key] = known.model_copy(update={"count": known.count + group.count, "last": group.last})


def merged_groups(groups: dict[str, WarningGroup]) -> list[WarningGroup]:
    """Groups across files by template, most frequent first."""
    by_template: dict[str, WarningGroup] = {}
    for group in groups.values():
        merged = by_template.get(group.template)
        if merged is None:
            by_template[group.template] = group.model_copy()
        else:
            merged.count += group.count
            if group.last.time and (merged.last.time is None or group.last.time > merged.last.time):
                merged.last = group.last
    return sorted(by_template.values(), key=lambda g: (-g.count, g.template))[:50]


def probe_live(run_dir: Path, run_name: str, inference_url: str | None, deps: CollectorDeps) -> LiveProbes:
    live = LiveProbes()
    try:
        live.processes, live.process_match = deps.processes.run_processes(run_dir, run_name)
    except OSError as exc:
        live.problems.append(f"process scan failed: {exc}")
    try:
        live.host_ram_percent = deps.host.ram_percent()
        live.disk_free_ratio, live.disk_free_gib = deps.host.disk_free(run_dir)
    except OSError as exc:
        live.problems.append(f"host probe failed: {exc}")
    cluster = deps.cluster.probe(run_dir)
    if cluster is not None:
        live.slurm_jobs = cluster.report
        live.slurm = cluster.states() or None
        live.node_processes = cluster.nodes
        live.problems += cluster.notes
    if inference_url:
        try:
            live.vllm = hostprobes.probe_vllm(inference_url, deps.probe_timeout_s, deps.http_get)
        except OSError as exc:
            live.problems.append(str(exc))
    return live
