"""Collector node: gathers one check-in's `Observation` and folds what is new into the run's history.

Every file is read from where the last check-in stopped. Live probes (processes, RAM, disk,
vLLM, SLURM) are skipped offline. Bad input becomes notes; nothing here raises on a bad file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path

from rlagent.models.observation import EvalPoint, FileCursor, LiveProbes, LogEvent, MetricHistory, Observation, WarningGroup
from rlagent.models.run import Layout
from rlagent.models.state import CheckinState, typed_node
from rlagent.tools import hostprobes, safefs
from rlagent.tools.checkpoints import checkpoint_parts
from rlagent.tools.configs import read_run_config
from rlagent.tools.layout import current_attempt, log_files
from rlagent.tools.logread import LogRead, read_log
from rlagent.tools.metrics_jsonl import REL as METRICS_REL
from rlagent.tools.metrics_jsonl import read_metrics
from rlagent.tools.processes import find_run_processes
from rlagent.tools.rollouts import l_step_fractions, sample_key, sample_rollouts

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
    clock: Callable[[], datetime]
    """Wall clock for live check-ins (injected so tests and replays can fix it)."""
    probe_timeout_s: float = 2.0


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

    attempt = current_attempt(run_dir, notes) if state.run.layout is Layout.H else None
    new_attempt = state.memory.attempt is not None and attempt is not None and attempt != state.memory.attempt
    if new_attempt:
        notes.append(f"new attempt {attempt} (was {state.memory.attempt}): the run was restarted or resumed")

    cursors: dict[str, FileCursor] = {}
    groups = {} if new_attempt else dict(state.memory.groups)
    events = list(state.memory.events)
    history = _fresh_history(state.memory.history)
    new_events: list[LogEvent] = []
    bytes_read = 0
    newest: datetime | None = None

    for path in log_files(run_dir, state.run.layout, notes):
        rel = str(path.relative_to(run_dir))
        read = read_log(path, rel, state.memory.cursors.get(rel), deps.tz, keep_per_kind=EVENTS_PER_KIND)
        notes += read.notes
        if read.cursor is not None:
            cursors[rel] = read.cursor
            if read.cursor.last_time and (newest is None or read.cursor.last_time > newest):
                newest = read.cursor.last_time
        bytes_read += read.bytes_read
        if read.fresh:
            events = [e for e in events if e.file != rel]
            groups = {k: g for k, g in groups.items() if g.first.file != rel}
        _merge_steps(history, read)
        _merge_counts(history, rel, read.step_counts, fresh=read.fresh)
        _merge_evals(history, [EvalPoint(env=e.env, step=e.step, score=e.score) for e in read.evals if e.step is not None])
        new_events += read.events
        _merge_groups(groups, rel, read.groups)
    for rel, cursor in state.memory.cursors.items():
        if rel not in cursors and rel != METRICS_REL and attempt is None and safefs.exists(Path(run_dir, rel)):
            cursors[rel] = cursor  # a file not listed this time but still there (kept for L)

    metrics = read_metrics(run_dir, state.memory.cursors.get(METRICS_REL))
    notes += metrics.notes
    if metrics.cursor is not None:
        cursors[METRICS_REL] = metrics.cursor
        bytes_read += metrics.bytes_read
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
            if newest is None or seen > newest:
                newest = seen
    rollout_stats_step = state.memory.rollout_stats_step
    if state.run.layout is Layout.L:
        # The newest step's file may still be growing: it is read again next time.
        fractions = l_step_fractions(run_dir, max(0, state.memory.rollout_stats_step - 1))
        for step, values in fractions.items():
            _update_row(history.orchestrator, step, values)
        rollout_stats_step = max([state.memory.rollout_stats_step, *fractions])
    _refresh_early(history)
    _trim(history)

    events = _bounded_events(events + new_events)
    key = sample_key(run_dir, state.run.layout)
    if key is not None and key == state.memory.samples_key:
        rollout_step, rollouts_per_step, rollouts = state.memory.samples_step, state.memory.samples_count, state.memory.samples
    else:
        rollout_step, rollouts_per_step, rollouts, rollout_notes = sample_rollouts(run_dir, state.run.layout)
        notes += rollout_notes

    if deps.offline:
        now = state.now_override or newest or deps.clock()
        live = LiveProbes()
    else:
        now = deps.clock()
        live = probe_live(run_dir, state.run.name, config.inference_url, deps.probe_timeout_s)
        notes += live.problems

    roles_seen = sorted(set(state.memory.processes_seen) | {p.role for p in live.processes or []})
    observation = Observation(
        now=now,
        offline=deps.offline,
        attempt=attempt,
        new_attempt=new_attempt,
        newest_line_time=newest,
        trainer_step=history.last_step("trainer"),
        orchestrator_step=history.last_step("orchestrator"),
        bytes_read=bytes_read,
        warning_groups=merged_groups(groups),
        new_events=new_events[-200:],
        rollouts=rollouts,
        rollouts_step=rollout_step,
        rollouts_per_step=rollouts_per_step or None,
        checkpoints=checkpoint_parts(run_dir, state.run.layout, notes=notes),
        live=live,
        notes=notes,
    )
    return {
        "config": config,
        "attempt": attempt or state.memory.attempt,
        "cursors": cursors,
        "history": history,
        "events": events,
        "groups": groups,
        "observation": observation,
        "processes_seen": roles_seen,
        "rollout_stats_step": rollout_stats_step,
        "samples": rollouts,
        "samples_key": key,
        "samples_step": rollout_step,
        "samples_count": rollouts_per_step,
    }


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


def probe_live(run_dir: Path, run_name: str, inference_url: str | None, timeout: float) -> LiveProbes:
    live = LiveProbes()
    try:
        live.processes, live.process_match = find_run_processes(run_dir, run_name)
    except OSError as exc:
        live.problems.append(f"process scan failed: {exc}")
    try:
        live.host_ram_percent = hostprobes.host_ram_percent()
        live.disk_free_ratio, live.disk_free_gib = hostprobes.disk_free(run_dir)
    except OSError as exc:
        live.problems.append(f"host probe failed: {exc}")
    live.slurm = hostprobes.slurm_job_states(run_dir) or None
    if inference_url:
        try:
            live.vllm = hostprobes.probe_vllm(inference_url, timeout)
        except OSError as exc:
            live.problems.append(str(exc))
    return live
