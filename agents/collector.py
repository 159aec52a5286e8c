"""Collector node: gathers one check-in's `Observation` and folds what is new into the run's history.

Every file is read from where the last check-in stopped. Live probes (processes, RAM, disk,
vLLM, SLURM) are skipped offline. Bad input becomes notes; nothing here raises on a bad file.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path

from rlagent.models.cluster import MultiNodeView
from rlagent.models.observation import (
    EVENTS_PER_KIND,
    UNDATED,
    EvalPoint,
    FileCursor,
    LiveProbes,
    LogEvent,
    MetricHistory,
    Observation,
    Rollout,
    WarningGroup,
    event_order,
)
from rlagent.models.run import Framework, Layout, RunInfo
from rlagent.models.state import CheckinState, typed_node
from rlagent.tools import hostprobes, multinode, safefs
from rlagent.tools.adapters import adapter_for
from rlagent.tools.adapters.base import FileRead
from rlagent.tools.adapters.common import degenerate
from rlagent.tools.clock import Clock, SystemClock
from rlagent.tools.configs import read_run_config
from rlagent.tools.metrics_jsonl import REL as METRICS_REL
from rlagent.tools.processes import ProcessProbe, SystemProcesses
from rlagent.tools.rotation import shifted_generations
from rlagent.tools.slurm_probe import ClusterProbe, SystemCluster
from rlagent.tools.steprows import EARLY_VALUES as KEEP_EARLY
from rlagent.tools.steprows import KEEP_STEPS

HISTORY_STEPS = KEEP_STEPS
"""Steps of each series kept in the state store (rules look back far less); the readers hold no more."""
EARLY_VALUES = KEEP_EARLY
"""First finite values kept per series as the run's early baseline."""
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
    adapter = adapter_for(state.run.framework)
    prime = state.run.framework is Framework.PRIME_RL
    layout = state.run.layout or Layout.H
    config = read_run_config(run_dir, layout) if prime else adapter.read_config(run_dir)
    notes += config.problems

    run_read = adapter.read(state.run, state.memory.cursors, deps.tz, keep_per_kind=EVENTS_PER_KIND)
    notes += run_read.notes
    attempt = run_read.attempt
    new_attempt = state.memory.attempt is not None and attempt is not None and attempt != state.memory.attempt
    if new_attempt:
        notes.append(f"new attempt {attempt} (was {state.memory.attempt}): the run was restarted or resumed")

    reading = _Reading(
        history=_fresh_history(state.memory.history),
        groups={} if new_attempt else dict(state.memory.groups),
        events=list(state.memory.events),
        notes=notes,
    )
    for file_read in run_read.files:
        first_read = file_read.fresh and file_read.rel not in state.memory.cursors  # not a rotated log's rest
        if attempt is not None and first_read and file_read.rel.startswith(f"logs/{attempt}/"):
            _drop_abandoned_steps(reading.history, file_read)
        _merge_file(reading, file_read)
    if prime:
        for rel, cursor in state.memory.cursors.items():
            if rel not in reading.cursors and rel != METRICS_REL and attempt is None and safefs.exists(Path(run_dir, rel)):
                reading.cursors[rel] = cursor  # a file not listed this time but still there (kept for L)
    tree = _read_tree(reading, state, run_dir, deps.tz) if prime else None
    rollout_stats_step = _read_l_rollout_stats(reading.history, state, adapter) if prime else state.memory.rollout_stats_step
    history, newest = reading.history, reading.newest
    _refresh_early(history)
    _trim(history)
    events = _bounded_events(reading.events + reading.new_events)
    samples = _samples(state, run_dir, adapter, layout, notes)

    if deps.offline:
        now = state.now_override or newest or deps.clock.now()
        live = LiveProbes()
    else:
        now = deps.clock.now()
        live = probe_live(run_dir, state.run, config.inference_url, deps)
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
        behind=reading.behind,
        warning_groups=merged_groups(reading.groups),
        new_events=_read_now(events, reading.new_events),
        rollouts=samples.rollouts,
        rollouts_step=samples.step,
        rollouts_per_step=samples.count or None,
        sample_stats=samples.stats,
        checkpoints=adapter.checkpoints(run_dir, layout, notes=notes) if prime else adapter.checkpoints(run_dir, notes=notes),
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
        "samples": samples.rollouts,
        "samples_key": samples.key,
        "samples_step": samples.step,
        "samples_count": samples.count,
        "samples_stats": samples.stats,
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
    """What this check-in's reads add up to: every source file the framework's adapter read."""

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
    behind: list[str] = field(default_factory=list)
    """Files whose backlog read stopped at its time budget (FileRead.behind)."""

    def saw(self, when: datetime) -> None:
        if self.newest is None or when > self.newest:
            self.newest = when


def _merge_file(reading: _Reading, read: FileRead) -> None:
    """One source's new rows, evals, events and warning groups into `reading`."""
    history = reading.history
    if read.moved_from is not None:
        for old, new in shifted_generations(read.moved_from, read.rel, _cited_files(reading)):
            _moved(reading, old, new)  # `log.1` is `log.2` now: its events were read before
        _moved(reading, read.moved_from, read.rel)
    reading.notes += read.notes
    if read.cursor is not None and read.rel:
        reading.cursors[read.rel] = read.cursor
    if read.newest is not None:
        reading.saw(read.newest)
    reading.bytes_read += read.bytes_read
    if read.behind:
        reading.behind.append(read.rel)
    if read.fresh:
        reading.events = [e for e in reading.events if e.file != read.rel]
        reading.groups = {k: g for k, g in reading.groups.items() if g.first.file != read.rel}
    for row in read.rows:
        target = history.table(row.process)  # type: ignore[arg-type]
        values = row.values
        if read.under:
            old = target.get(row.step, {})
            values = {k: v for k, v in values.items() if not (k in old and not math.isfinite(old[k]))}
        elif read.rounded and not read.fresh:
            old = target.get(row.step, {})
            values = {k: v for k, v in values.items() if not (k in old and math.isfinite(old[k]))}
        _update_row(target, row.step, values)
        if row.when is not None:
            seen = history.step_seen_at.get(row.process)
            if seen is None or row.when > seen:
                history.step_seen_at[row.process] = row.when
    for process, when in read.times.items():
        seen = history.step_seen_at.get(process)
        if seen is None or when > seen:
            history.step_seen_at[process] = when
    if read.rel and (read.counts or read.fresh):
        _merge_counts(history, read.rel, read.counts, fresh=read.fresh)
    _merge_evals(history, read.evals)
    reading.new_events += read.events
    _merge_groups(reading.groups, read.rel, read.groups)


def _moved(reading: _Reading, old: str, new: str) -> None:
    """A rotated log's lines read before are in the file it was renamed or copied to now, at the same
    numbers (tools.rotation): its kept events, warning groups and counts say so."""

    def there(event: LogEvent) -> LogEvent:
        return event.model_copy(update={"file": new}) if event.file == old else event

    reading.events = [there(e) for e in reading.events]
    prefix = f"{old}\x00"
    groups = {key: group for key, group in reading.groups.items() if not key.startswith(prefix)}
    for key, group in reading.groups.items():
        if key.startswith(prefix):
            key = f"{new}\x00{key[len(prefix) :]}"
            group = group.model_copy(update={"first": there(group.first), "last": there(group.last)})
            known = groups.get(key)
            if known is not None:  # an older generation under the new name
                group = group.model_copy(update={"count": known.count + group.count, "first": known.first})
            groups[key] = group
    reading.groups = groups
    counts = dict(reading.history.event_counts)
    if old in counts:
        merged = {kind: dict(steps) for kind, steps in counts.get(new, {}).items()}
        _add_counts(merged, counts.pop(old))
        reading.history.event_counts = {**counts, new: merged}


def _cited_files(reading: _Reading) -> set[str]:
    """The files the remembered events, warning groups and per-step counts cite."""
    groups = reading.groups.values()
    return (
        {e.file for e in reading.events}
        | {g.first.file for g in groups}
        | {g.last.file for g in groups}
        | set(reading.history.event_counts)
    )


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


def _read_l_rollout_stats(history: MetricHistory, state: CheckinState, adapter) -> int:
    """Layout L: truncation, error and trainable fractions from the rollouts files (its logs have
    none); the newest step read so far, whose file may still grow and is read again next time."""
    if state.run.layout is not Layout.L:
        return state.memory.rollout_stats_step
    fractions = adapter.rollout_stats(state.run, max(0, state.memory.rollout_stats_step - 1))
    for step, values in fractions.items():
        _update_row(history.orchestrator, step, values)
    return max([state.memory.rollout_stats_step, *fractions])


@dataclass
class _Samples:
    key: str | None
    step: int | None
    count: int
    rollouts: list[Rollout]
    stats: dict[str, float]


def _samples(state: CheckinState, run_dir: Path, adapter, layout: Layout, notes: list[str]) -> _Samples:
    """Telling samples of the newest step (and statistics over all of them): sampled again only when
    that file changed."""
    memory = state.memory
    if state.run.framework is Framework.PRIME_RL:
        found = adapter.samples(run_dir, memory.samples_key, layout)
    else:
        found = adapter.samples(run_dir, memory.samples_key)
    if found is None:
        return _Samples(memory.samples_key, memory.samples_step, memory.samples_count, memory.samples, memory.samples_stats)
    notes += found.notes
    return _Samples(found.key, found.step, found.count, found.rollouts, sample_stats(found.all))


def _fresh_history(old: MetricHistory) -> MetricHistory:
    """A copy to update without touching the input state: outer containers are copied and rows
    are replaced, never mutated (a deep copy of a long history costs more than the whole read)."""
    fresh = MetricHistory.model_construct(
        trainer=dict(old.trainer),
        orchestrator=dict(old.orchestrator),
        early=dict(old.early),
        evals=list(old.evals),
        step_seen_at=dict(old.step_seen_at),
        event_counts=dict(old.event_counts),
    )
    fresh.carry_memo(old)
    return fresh


def _update_row(table: dict[int, dict[str, float]], step: int, values: dict[str, float]) -> None:
    # A new row object, never the old one changed: what was built from a row object still in the
    # table is reused (the rules' series, rlagent/models/series_memo.py; the packed rows of the store).
    table[step] = {**table.get(step, {}), **values}


def _drop_abandoned_steps(history: MetricHistory, read: FileRead) -> None:
    """A log of the newest attempt, read for the first time: a resumed run goes on from its
    checkpoint, so the steps an earlier attempt logged from there on are no longer the run's (its
    step is the newest attempt's, and its metrics are the resumed ones)."""
    firsts: dict[str, int] = {}
    for row in read.rows:
        firsts[row.process] = min(firsts.get(row.process, row.step), row.step)
    for process, first in firsts.items():
        table = history.table(process)  # type: ignore[arg-type]
        for step in [s for s in table if s >= first]:
            del table[step]


def _merge_counts(history: MetricHistory, rel: str, counts: dict[str, dict[int, int]], *, fresh: bool) -> None:
    """Add one file's per-step event counts (a file read again from the start replaces its own)."""
    if not counts and not fresh:
        return
    merged = {} if fresh else {kind: dict(steps) for kind, steps in history.event_counts.get(rel, {}).items()}
    _add_counts(merged, counts)
    history.event_counts = {**history.event_counts, rel: merged}


def _add_counts(merged: dict[str, dict[int, int]], counts: dict[str, dict[int, int]]) -> None:
    """Per kind and step, `counts` added into `merged` (its own copies), the newest steps kept."""
    for kind, steps in counts.items():
        target = merged.setdefault(kind, {})
        for step, n in steps.items():
            target[step] = target.get(step, 0) + n
        if len(target) > HISTORY_STEPS:
            merged[kind] = dict(sorted(target.items())[-HISTORY_STEPS:])


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
        metrics = set().union(*table.values())  # every metric name (the keys of every row, gathered in C)
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


def _read_now(kept: list[LogEvent], read: list[LogEvent]) -> list[LogEvent]:
    """The kept events that this check-in read, in their time order: bounded as the run's events
    are (per kind, so hundreds of warnings read after a crash do not push it out), and so every
    kept event `RuleContext.is_new` is asked about is answered by it."""
    keys = {(e.file, e.line, e.kind) for e in read}
    return [e for e in kept if (e.file, e.line, e.kind) in keys]


def _bounded_events(events: list[LogEvent]) -> list[LogEvent]:
    """The newest EVENTS_PER_KIND events of each kind, in time order. Newest by time, not by the
    order the files were read in: an env error is logged by the orchestrator and by the env
    server, and the last ones read are not the last ones written. A line with no time of its own
    (torchrun's stderr after a `Fatal error`, a console's traceback) is as new as the dated line
    before it in its file. Kept too, however many follow it: the first of the ranks' error records of
    each attempt (tools/multinode.py `first_failures`), the root cause `rank_failed` names when
    torchrun's own block is missing; a multi-node crash makes hundreds, every rank timing out after it."""
    written = _written_at(events)
    seen: set[tuple[str, int, str | None]] = set()
    per_kind: dict[str | None, list[LogEvent]] = {}
    for event in sorted(events, key=lambda e: (written[e.file, e.line], e.file, e.line)):
        key = (event.file, event.line, event.kind)
        if key in seen:
            continue
        seen.add(key)
        per_kind.setdefault(event.kind, []).append(event)
    kept = [e for bucket in per_kind.values() for e in bucket[-EVENTS_PER_KIND:]]
    failures = per_kind.get("rank_error", [])
    if len(failures) > EVENTS_PER_KIND:
        newest = failures[-EVENTS_PER_KIND:]
        kept += [first for first in multinode.first_failures(failures) if all(e is not first for e in newest)]
    return sorted(kept, key=event_order)


def _written_at(events: list[LogEvent]) -> dict[tuple[str, int], datetime]:
    """(file, line) -> the event's time, or that of the nearest dated event above it in its file."""
    out: dict[tuple[str, int], datetime] = {}
    last: dict[str, datetime] = {}
    for event in sorted(events, key=lambda e: (e.file, e.line, e.time is None)):
        if event.time is not None:
            last[event.file] = event.time
        out.setdefault((event.file, event.line), event.time or last.get(event.file, UNDATED))
    return out


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


def sample_stats(rollouts: list[Rollout]) -> dict[str, float]:
    """Over every sampled completion of the step: how many, how many degenerate (empty, one character
    or token repeated), and the share of the most common completion (one answer for every prompt).
    A rollout that failed before the model wrote anything (an environment's error, a timeout) has no
    completion to judge: it is an error, counted by the rules of errors, not an empty answer."""
    rollouts = [r for r in rollouts if not (r.error and not r.completion.strip())]
    if not rollouts:
        return {}
    texts = [r.completion.strip() for r in rollouts]
    ((top, common),) = Counter(texts).most_common(1)  # the first written of equally common texts
    scored = [(r.reward, t) for r, t in zip(rollouts, texts, strict=True) if r.reward is not None and math.isfinite(r.reward)]
    rewards = [reward for reward, _ in scored]
    top_rewards = [reward for reward, text in scored if text == top]
    stats = {
        "total": float(len(texts)),
        "degenerate": float(sum(degenerate(t) for t in texts)),
        "identical": float(common) if common > 1 else 0.0,
    }
    if rewards and top_rewards:
        stats["identical_reward"] = sum(top_rewards) / len(top_rewards)
        stats["max_reward"] = max(rewards)
        stats["min_reward"] = min(rewards)
    return stats


def probe_live(run_dir: Path, run: RunInfo, inference_url: str | None, deps: CollectorDeps) -> LiveProbes:
    live = LiveProbes()
    try:
        if run.framework is Framework.PRIME_RL:
            live.processes, live.process_match = deps.processes.run_processes(run_dir, run.name)
        else:
            markers = adapter_for(run.framework).process_markers(run)
            live.processes, live.process_match = deps.processes.run_processes(
                run_dir, run.name, framework=run.framework.value, markers=markers
            )
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
