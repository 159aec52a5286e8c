"""prime-rl: both layouts, read by the existing tools (layout, logread, metrics_jsonl, rollouts,
checkpoints, configs), wrapped into the adapter interface; their bodies are unchanged."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, tzinfo
from functools import partial
from pathlib import Path
from typing import Any

from rlagent.models.observation import EvalPoint, FileCursor
from rlagent.models.run import Framework, Layout, RunConfig, RunInfo
from rlagent.tools.adapters.base import FileRead, ResumePlan, RunRead, Samples, StepRow
from rlagent.tools.adapters.console import ConsoleState, analyse
from rlagent.tools.checkpoints import checkpoint_parts, newest_complete
from rlagent.tools.configs import read_run_config
from rlagent.tools.dayclock import shared_anchor
from rlagent.tools.forkread import run_split
from rlagent.tools.frameworks.lines import LogLine
from rlagent.tools.frameworks.records import MetricRow
from rlagent.tools.layout import RunNotFound, _looks_like_run, current_attempt, discover_run, log_files
from rlagent.tools.logread import LogRead, read_log
from rlagent.tools.logscan import newest_time_of_day
from rlagent.tools.metrics_jsonl import REL as METRICS_REL
from rlagent.tools.metrics_jsonl import MetricsRead, read_metrics
from rlagent.tools.rollouts import l_step_fractions, newest_rollouts_file, pick_telling, read_samples, sample_key
from rlagent.tools.rotation import read_before, renamed_away, still_awaited
from rlagent.tools.steplines import parse_step_line


def _layout(run: RunInfo) -> Layout:
    return run.layout or Layout.H


class PrimeRLAdapter:
    framework = Framework.PRIME_RL

    def recognise(self, path: Path) -> int:
        try:
            discover_run(path)
        except RunNotFound:
            return 0
        return 100 if _looks_like_run(path) is not None else 50

    def discover(self, path: Path) -> RunInfo:
        return discover_run(path)

    def read_config(self, run_dir: Path, layout: Layout = Layout.H) -> RunConfig:
        return read_run_config(run_dir, layout)

    def config_of(self, run: RunInfo) -> RunConfig:
        return read_run_config(Path(run.run_dir), _layout(run))

    def read(self, run: RunInfo, cursors: dict[str, FileCursor], tz: tzinfo, *, keep_per_kind: int = 50) -> RunRead:
        run_dir = Path(run.run_dir)
        layout = _layout(run)
        out = RunRead()
        out.attempt = current_attempt(run_dir, out.notes) if layout is Layout.H else None
        rels = [str(path.relative_to(run_dir)) for path in log_files(run_dir, layout, out.notes)]

        def read(path: Path, name: str, cursor: FileCursor | None) -> LogRead:
            return read_log(path, name, cursor, tz, keep_per_kind=keep_per_kind)

        gone = renamed_away(cursors, [*rels, METRICS_REL], run_dir)
        out.files += [FileRead(rel, awaited) for rel, awaited in still_awaited(cursors, rels).items()]
        cursors = dict(cursors)
        for rel in [*rels, *gone]:  # a rotated log's rest (at a first read, its older generations), then the log as their sequel
            rotated = read_before(read, run_dir / rel, rel, cursors.get(rel))
            if rotated is not None:
                parts, cursors[rel], note = rotated
                out.files += [_from_log(part, rounded=layout is Layout.H) for part in parts]
                out.notes.append(note)
                if rel in gone:  # renamed, not made again yet: its sequel is awaited under its name
                    out.files.append(FileRead(rel, cursors[rel]))
        first = [rel for rel in rels if cursors.get(rel) is None]  # read from the start for the first time
        anchor = _shared_anchor(run_dir, first, tz)
        tasks: list[Callable[[], Any]] = [
            partial(
                read_log,
                run_dir / rel,
                rel,
                cursors.get(rel),
                tz,
                keep_per_kind=keep_per_kind,
                anchor=anchor if rel in first else None,
            )
            for rel in rels
        ]
        tasks.append(partial(read_metrics, run_dir, cursors.get(METRICS_REL)))
        weights = [_new_bytes(run_dir / rel, cursors.get(rel)) for rel in [*rels, METRICS_REL]]
        costs = [size * _cost_per_byte(rel) for size, rel in zip(weights, [*rels, METRICS_REL], strict=True)]
        *logs, metrics = run_split(tasks, weights, costs)
        out.files += [_from_log(read, rounded=layout is Layout.H) for read in logs]
        out.files.append(_from_metrics(metrics))
        return out

    def rollout_stats(self, run: RunInfo, after_step: int) -> dict[int, dict[str, float]]:
        """Layout L: truncation, error and trainable fractions from the rollouts files (its logs have none)."""
        if _layout(run) is not Layout.L:
            return {}
        return l_step_fractions(Path(run.run_dir), after_step)

    def read_text(self, text: str, rel: str, run_dir: Path | None = None, resumed_from: int | None = None) -> FileRead:
        return analyse(text, rel, "prime-rl", _parse_rows, ConsoleState())

    def samples(self, run_dir: Path, known_key: str | None, layout: Layout = Layout.H) -> Samples | None:
        notes: list[str] = []
        found = newest_rollouts_file(run_dir, layout, notes)
        if found is None:
            return Samples(key=None, step=None, count=0, rollouts=[], notes=notes)
        key = sample_key(run_dir, layout, found)
        if key is not None and key == known_key:
            return None
        step, count, sampled, more = read_samples(run_dir, layout, found)
        notes += more
        return Samples(key=key, step=step, count=count, rollouts=pick_telling(sampled), notes=notes, all=sampled)

    def checkpoints(self, run_dir: Path, layout: Layout = Layout.H, notes: list[str] | None = None) -> dict[int, list[str]]:
        return checkpoint_parts(run_dir, layout, notes=notes)

    def newest_checkpoint(self, run_dir: Path, layout: Layout = Layout.H) -> int | None:
        return newest_complete(checkpoint_parts(run_dir, layout, newest=10**6))

    def resume_plan(self, run_dir: Path, launch_argv: list[str], layout: Layout = Layout.H) -> ResumePlan:
        """Resume flags per layout (H `--resume.step N`, L `--ckpt.resume-step N`); agents/command_plan
        builds the whole command (it also sets H's `--run.name` and L's `--output-dir`)."""
        step = self.newest_checkpoint(run_dir, layout)
        if step is None:
            return ResumePlan(False, why="no complete checkpoint (trainer/.metadata and orchestrator/progress.pt)")
        flags = ["--resume.step", str(step)] if layout is Layout.H else ["--ckpt.resume-step", str(step)]
        return ResumePlan(True, step, add=flags)

    def process_markers(self, run: RunInfo) -> list[str]:
        return [run.run_dir]


def _cost_per_byte(rel: str) -> int:
    """A read's time per byte, relative to vLLM's inference log: CPU per byte of a cold read of the
    benchmark's 1 and 4 GB runs was 0.21-0.24 ns for inference.log (almost no line matters),
    2.4-2.5 ns for metrics.jsonl and 25-86 ns for the orchestrator and trainer logs (a warning or
    step line every few hundred bytes). The two processes of a split read take the longest first."""
    if rel == METRICS_REL:
        return 10
    return 1 if Path(rel).name.startswith("inference") else 100


def _shared_anchor(run_dir: Path, fresh: list[str], tz: tzinfo) -> float | None:
    """One anchor for the logs read from their start when their mtimes are a copy's (tools.dayclock)."""
    newest: list[tuple[int, float]] = []
    for rel in fresh:
        seconds = newest_time_of_day(run_dir / rel, run_dir)
        if seconds is not None:
            try:
                newest.append((seconds, (run_dir / rel).stat().st_mtime))
            except OSError:
                continue
    return shared_anchor(newest, tz)


def _new_bytes(path: Path, cursor: FileCursor | None) -> int:
    """About what a read of `path` will take (what it held at the cursor is not read again); 0 if
    it cannot be stat'ed (its read will say why)."""
    try:
        size = path.stat().st_size
    except OSError:
        return 0
    return max(size - (cursor.offset if cursor else 0), 0)


def _parse_rows(line: LogLine, state: ConsoleState | None = None) -> list[MetricRow]:
    text = line.text
    at = text.find("Step ")
    if at < 0:
        return []
    parsed = parse_step_line(text[at:], None)
    if parsed is None:
        return []
    return [MetricRow(step=parsed.step, values=parsed.values, lineno=line.lineno, kind=f"prime-rl:{parsed.process}")]


def _from_log(read: LogRead, *, rounded: bool) -> FileRead:
    """A log's read; `rounded`: its step lines print rounded what metrics.jsonl holds in full (layout H;
    layout L has no metrics.jsonl, its step lines are its figures)."""
    out = FileRead(read.rel, read.cursor, fresh=read.fresh, events=read.events, groups=read.groups, counts=read.step_counts)
    out.moved_from, out.rounded = read.moved_from, rounded
    out.notes, out.bytes_read = read.notes, read.bytes_read
    for line, when in read.steps:
        out.rows.append(StepRow(line.process, line.step, line.values, when))
    out.times = dict(read.steps.newest)  # of every step line, those dropped from the bounded rows too
    out.evals = [EvalPoint(env=e.env, step=e.step, score=e.score) for e in read.evals if e.step is not None]
    if read.cursor is not None and read.cursor.last_time:
        out.newest = read.cursor.last_time
    return out


def _from_metrics(metrics: MetricsRead) -> FileRead:
    out = FileRead(METRICS_REL, metrics.cursor, under=True, notes=metrics.notes, bytes_read=metrics.bytes_read)
    if metrics.cursor is None:
        out.rel = ""  # no metrics.jsonl: nothing to keep a cursor for
    for process, table in (("trainer", metrics.trainer), ("orchestrator", metrics.orchestrator)):
        for step, values in table.items():
            out.rows.append(StepRow(process, step, values))
    out.evals = list(metrics.evals)
    for process, stamp in metrics.times.items():
        seen = datetime.fromtimestamp(stamp, UTC)
        out.times[process] = seen
        out.newest = seen if out.newest is None or seen > out.newest else out.newest
    return out
