"""What a rule sees, and the small judgements every rule shares.

Rules judge a run against its own history: the early-run baseline, the rolling median of the
previous steps, conditions sustained over several steps. The helpers here say how, once, so
that every rule answers the same question the same way (what is "early", what is "recent",
did the run come back after that crash line).
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
import statistics
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property

from rlagent.agents.rules.thresholds import Thresholds
from rlagent.models.observation import LogEvent, MetricHistory, Observation, Process, event_order
from rlagent.models.run import RunConfig
from rlagent.models.series_memo import PointOf, TableSeries, step_of
from rlagent.models.state import CheckinState

Point = tuple[int, float]
"""(step, value) of one metric."""

PROCESSES: tuple[Process, ...] = ("trainer", "orchestrator")

# Which process a crash line speaks of: the launcher names it, `clean_exit` names the entrypoint.
_CRASH_PROCESS = (
    (re.compile(r"\bTrainer failed with exit code|Fatal error in train\b|ChildFailedError"), "trainer"),
    (re.compile(r"\bOrchestrator failed with exit code|Fatal error in run_orchestrator"), "orchestrator"),
)
_FINISHED_TRAINING = re.compile(
    r"Training finished!|RL training finished!|RL trainer finished!|Final validation metrics:|^\{'train_runtime':"
)
# SLURM job states that end a job by failure (CANCELLED is a person's decision, not a crash).
SLURM_FAILED = frozenset({"FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "TIMEOUT", "DEADLINE"})


# --- series helpers ------------------------------------------------------------------------


def median(values: Iterable[float]) -> float:
    return statistics.median(values)


def rolling_median(values: Sequence[float], window: int) -> list[float]:
    """Median of each value's trailing window (shorter at the start)."""
    if window < 1 or not all(math.isfinite(v) and (v or math.copysign(1.0, v) > 0) for v in values):
        # NaN has no place in a sorted window, and -0.0 == 0.0 would let the window drop the wrong zero.
        return [median(values[max(0, i - window + 1) : i + 1]) for i in range(len(values))]
    out: list[float] = []
    ordered: list[float] = []  # the window, sorted: one insert and one removal per step
    for i, value in enumerate(values):
        bisect.insort(ordered, value)
        if i >= window:
            ordered.remove(values[i - window])
        n = len(ordered)
        out.append(ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2)  # as statistics.median
    return out


def trailing(points: Sequence[Point], holds: Callable[[float], bool]) -> list[Point]:
    """The run of points at the end of the series for which `holds` is true."""
    start = len(points)
    while start > 0 and holds(points[start - 1][1]):
        start -= 1
    return list(points[start:])


def trailing_by(points: Sequence[Point], value_of: Callable[[int], float], holds: Callable[[float], bool]) -> list[Point]:
    """`trailing` of (step, value_of(step)) at the points' steps, computed back from the newest point
    only as far as the run goes (a healthy run stops at the first)."""
    out: list[Point] = []
    for step, _ in reversed(points):
        value = value_of(step)
        if not holds(value):
            break
        out.append((step, value))
    out.reverse()
    return out


def trailing_medians(points: Sequence[Point], k: int, holds: Callable[[float], bool]) -> list[Point]:
    """`trailing` over the k-step rolling median (from the k-th point on): the run of (step, median
    of the k values up to it) at the end of the series for which `holds` is true. Computed back
    from the newest point only as far as the run goes: a healthy run stops at the first."""
    values = [v for _, v in points]
    out: list[Point] = []
    for i in range(len(points) - 1, k - 2, -1):
        value = median(values[i - k + 1 : i + 1])
        if not holds(value):
            break
        out.append((points[i][0], value))
    out.reverse()
    return out


def streak_vs_reference(
    points: Sequence[Point], ratio: float, *, below: bool, window: int, min_ref: int
) -> tuple[list[Point], float] | None:
    """The longest trailing streak whose every value is below (or above) `ratio` x ref, where
    ref is the median of the `window` values just before the streak began; None if none.

    The reference is taken before the streak so that a lasting change is still judged against
    what came before it, not against a rolling median that has already moved with it.
    `points` are finite (as `RuleContext.series` gives them); `min_ref` is at least 1.
    """
    values = [v for _, v in points]
    # Prefix extremes bound every reference: the median of values before `start` is at most their
    # max (at least their min). Once the streak's own extreme is past `ratio` x that bound, no
    # earlier start can hold either (its extreme only grows, its bound only shrinks): stop there.
    # A healthy series stops at its newest value, so the first bound is taken alone and all of
    # them only when a second is needed.
    prefix_extreme = max if below else min
    bounds: list[float] = []
    best: tuple[int, float] | None = None
    extreme = values[-1] if values else math.nan
    for start in range(len(values) - 1, min_ref - 1, -1):
        # Every value from `start` on is below c <=> their max is below c.
        extreme = max(values[start], extreme) if below else min(values[start], extreme)
        ref = median(values[max(0, start - window) : start])
        limit = ratio * ref
        if (extreme < limit) if below else (extreme > limit):
            best = (start, ref)
        elif ratio >= 0:
            if start == len(values) - 1:
                bound = prefix_extreme(values[:start])
            else:
                bounds = bounds or list(itertools.accumulate(values, prefix_extreme))
                bound = bounds[start - 1]
            if (extreme >= ratio * bound) if below else (extreme <= ratio * bound):
                break
    return (list(points[best[0] :]), best[1]) if best else None


def noise_sd(values: Sequence[float]) -> float:
    """Step-to-step noise of a series: robust sd from the median absolute first difference
    (a trend barely moves first differences, a single outlier cannot)."""
    if len(values) < 3:
        return 0.0
    diffs = [b - a for a, b in itertools.pairwise(values)]
    center = median(diffs)
    mad = median(abs(d - center) for d in diffs)
    return 1.4826 * mad / math.sqrt(2)


def theil_sen_slope(points: Sequence[Point]) -> float:
    """Median of pairwise slopes: a trend estimate that one outlier does not move."""
    slopes = [(v2 - v1) / (s2 - s1) for i, (s1, v1) in enumerate(points) for s2, v2 in points[i + 1 :] if s2 != s1]
    return median(slopes) if slopes else 0.0


# --- formatting ----------------------------------------------------------------------------


def fmt(value: float) -> str:
    """A number as a person reads it in a summary: 4 significant digits."""
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


def times(ratio: float) -> str:
    """A multiple as a person says it: `1.8x`, `26x`."""
    return f"{ratio:.2g}x" if ratio < 10 else f"{ratio:.0f}x"


def pct(fraction: float) -> str:
    return f"{fraction * 100:.0f}%" if abs(fraction) >= 0.1 else f"{fraction * 100:.1f}%"


def point(metric: str, step: int, value: float) -> str:
    """Evidence string for one metric value: `metric @ step N = v`."""
    return f"{metric} @ step {step} = {fmt(value)}"


def points_evidence(metric: str, points: Sequence[Point], limit: int = 4) -> list[str]:
    """The first and last values of a range (the middle is implied by the summary)."""
    if len(points) <= limit:
        chosen = list(points)
    else:
        head = limit // 2
        chosen = [*points[:head], *points[-(limit - head) :]]
    return [point(metric, s, v) for s, v in chosen]


def cite_events(events: Sequence[LogEvent], limit: int = 4) -> list[str]:
    """Exact log lines as `file:line: message`: the first and the newest ones."""
    chosen = list(events) if len(events) <= limit else [*events[:1], *events[-(limit - 1) :]]
    return [e.cite() for e in chosen]


def aware(moment: datetime) -> datetime:
    """Times from the collector are aware UTC; a naive one is taken as UTC rather than crash."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def file_process(path: str) -> Process | None:
    """The process whose log a file is, by its name (step numbers in it are that process's)."""
    name = path.rsplit("/", 1)[-1]
    if name.startswith("orchestrator"):
        return "orchestrator"
    if name.startswith("trainer") or "/trainer/" in f"/{path}":
        return "trainer"
    return None


# --- the context -------------------------------------------------------------------------


@dataclass
class RuleContext:
    """Everything one check-in's rules may look at. Rules never do I/O; they read this."""

    observation: Observation
    history: MetricHistory
    events: list[LogEvent] = field(default_factory=list)
    """Classified events kept across check-ins, including this one's."""
    config: RunConfig = field(default_factory=RunConfig)
    thresholds: Thresholds = field(default_factory=Thresholds)
    processes_seen: list[str] = field(default_factory=list)
    """Process roles seen alive in earlier live check-ins."""
    framework: str = "prime-rl"
    """Which framework wrote the run (process roles and event kinds differ)."""
    now: datetime | None = None
    """Defaults to `observation.now` (offline: the time of the newest line)."""

    _tables: dict[str, TableSeries] = field(default_factory=dict, init=False, repr=False)
    _last: dict[str, int | None] = field(default_factory=dict, init=False, repr=False)
    _noise: dict[tuple[str, str], float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.now is None:
            self.now = self.observation.now
        self.now = aware(self.now)
        # This check-in's events belong to the kept ones; add any the caller did not merge yet.
        # The collector files one line under several kinds (a `Fatal error` caused by a CUDA OOM
        # is both `crash` and `cuda_oom`), so the kind is part of an event's identity.
        seen = {_key(e) for e in self.events}
        extra = [e for e in self.observation.new_events if _key(e) not in seen]
        if extra:  # in the order the run keeps its events (the collector's), so the last of a kind is its newest
            self.events = sorted([*self.events, *extra], key=event_order)

    @classmethod
    def from_state(cls, state: CheckinState, thresholds: Thresholds | None = None) -> RuleContext:
        if state.out.observation is None:
            raise ValueError("the collector has not produced an observation for this check-in")
        return cls(
            observation=state.out.observation,
            history=state.memory.history,
            events=list(state.memory.events),
            config=state.memory.config,
            thresholds=thresholds or Thresholds(),
            processes_seen=list(state.memory.processes_seen),
            framework=state.run.framework.value,
        )

    # --- metrics ---------------------------------------------------------------------------

    def series(self, process: Process, metric: str, *, after_warmup: bool = False) -> list[Point]:
        """Finite (step, value) points in step order (as history.finite_series; kept between
        check-ins for the rows that did not change: rules ask often). Do not change the list."""
        points = self._table_series(process).finite(metric)
        return self._after_warmup(points) if after_warmup else points

    def derived(self, process: Process, key: Hashable, point_of: PointOf, *, after_warmup: bool = False) -> list[Point]:
        """(step, point_of(step, row)) of the process's rows where it is not None, in step order;
        `key` names what `point_of` computes (kept between check-ins like `series`)."""
        points = self._table_series(process).derived(key, point_of)
        return self._after_warmup(points) if after_warmup else points

    def _table_series(self, process: Process) -> TableSeries:
        tables = self._tables.get(process)
        if tables is None:
            tables = self._tables[process] = self.history.table_series(process)
        return tables

    def _after_warmup(self, points: list[Point]) -> list[Point]:
        return points[bisect.bisect_right(points, self.thresholds.warmup_steps, key=step_of) :]

    def series_noise(self, process: Process, metric: str) -> float:
        """`noise_sd` of the metric's whole finite series (two rules ask for the reward's; once a check-in)."""
        key = (process, metric)
        if key not in self._noise:
            self._noise[key] = noise_sd([v for _, v in self.series(process, metric)])
        return self._noise[key]

    def window_means(self, process: Process, metric: str, window: int) -> list[Point]:
        """(last step, mean) of each full `window` of consecutive points of `series(process, metric)`
        (kept between check-ins like it). Do not change the list."""
        return self._table_series(process).means(metric, window)

    def metric_names(self, process: Process) -> set[str]:
        """Every metric name in the process's table (kept between check-ins like the series). Do not
        change the set."""
        return self._table_series(process).names()

    def early(self, process: Process, metric: str) -> float | None:
        """Median of the metric's first finite values (survives the sliding window); None if the
        run has too few of them. Falls back to the series itself while it still starts early."""
        t = self.thresholds
        values = [v for v in self.history.early_values(process, metric) if math.isfinite(v)][: t.early_steps]
        if not values:
            points = self.series(process, metric)
            if points and points[0][0] <= t.early_steps:
                values = [v for _, v in points[: t.early_steps]]
        if len(values) < t.min_baseline_points:
            return None
        return median(values)

    def last_step(self, process: Process) -> int | None:
        if process in self._last:  # asked for every kept event: the history's max step, found once
            return self._last[process]
        steps = [self.history.last_step(process)]
        steps.append(self.observation.trainer_step if process == "trainer" else self.observation.orchestrator_step)
        known = [s for s in steps if s is not None]
        self._last[process] = max(known) if known else None
        return self._last[process]

    @property
    def step(self) -> int | None:
        """The newest step of either process."""
        known = [s for p in PROCESSES if (s := self.last_step(p)) is not None]
        return max(known) if known else None

    @cached_property
    def median_step_seconds(self) -> float | None:
        """Median recent step time, trainer first (it paces the run), else the orchestrator's."""
        for process in PROCESSES:
            values = [v for _, v in self.series(process, "step_time")[-self.thresholds.rolling_window :] if v > 0]
            if values:
                return median(values)
        return None

    @property
    def newest_step_time(self) -> datetime | None:
        times = [aware(t) for t in self.history.step_seen_at.values()]
        return max(times) if times else None

    # --- events ----------------------------------------------------------------------------

    def of_kind(self, *kinds: str) -> list[LogEvent]:
        return [e for e in self.events if e.kind in kinds]

    def is_new(self, event: LogEvent) -> bool:
        """Read in this check-in (as opposed to kept from an earlier one)."""
        return any(_key(e) == _key(event) for e in self.observation.new_events)

    def event_process(self, event: LogEvent) -> Process | None:
        for regex, process in _CRASH_PROCESS:
            if regex.search(event.message):
                return process  # type: ignore[return-value]
        return file_process(event.file)

    def superseded(self, event: LogEvent) -> bool:
        """True when the run came back after this line: a `Resuming ... from checkpoint` line
        after it, or step lines well after it from the process it concerns (from both when
        the line does not say which), or, without times, a newer step in that process's log."""
        if any(_later(r, event) for r in self.of_kind("resumed")):
            return True
        process = self.event_process(event)
        if event.time is not None:
            deadline = aware(event.time) + timedelta(seconds=self.thresholds.resume_grace_seconds)
            seen = [self.history.step_seen_at.get(p) for p in ((process,) if process else PROCESSES)]
            return all(t is not None and aware(t) > deadline for t in seen)
        if event.step is not None and process is not None and file_process(event.file) == process:
            last = self.last_step(process)
            return last is not None and last > event.step
        return False

    def recent_events(self, kinds: Iterable[str], steps: int | None = None) -> list[LogEvent]:
        """Events of these kinds within the last `steps` steps of the process whose log they are
        in (by their step, else by their time against the median step time); none when neither
        can place them."""
        steps = steps or self.thresholds.event_window_steps
        kinds = set(kinds)
        per_step = self.median_step_seconds
        anchor = self.newest_step_time or self.now
        out = []
        for e in self.events:
            if e.kind not in kinds:
                continue
            process = file_process(e.file)
            last = self.last_step(process) if process else self.step
            if e.step is not None and last is not None:
                if e.step > last - steps:
                    out.append(e)
            elif e.time is not None and per_step is not None and aware(e.time) >= anchor - timedelta(seconds=steps * per_step):
                out.append(e)
        return out

    # --- facts about the run ---------------------------------------------------------------

    @cached_property
    def crash_events(self) -> list[LogEvent]:
        """Crash lines the run has not come back from. A kill by signal -9 is a crash too (the
        patterns file it as host_oom); `tearing down (exit code 0)` is a clean exit."""
        out, lines = [], set()
        for e in self.events:
            is_crash = e.kind == "crash" or (e.kind == "host_oom" and "exit code" in e.message) or self._fatal_traceback(e)
            if not is_crash or (e.numbers and all(n == 0 for n in e.numbers)) or (e.file, e.line) in lines:
                continue
            if not self.superseded(e):
                out.append(e)
                lines.add((e.file, e.line))
        return out

    def _fatal_traceback(self, event: LogEvent) -> bool:
        """An uncaught traceback in a verl/TRL/OpenRLHF console (or an excerpt) that no step followed:
        the process that printed it died (frameworks.md 4: the exception propagates and the driver exits)."""
        if event.kind != "traceback" or any(
            e.kind == "crash" and e.file == event.file and e.line >= event.line for e in self.events
        ):
            return False
        last = self.step
        return last is None or (event.step is not None and last <= event.step)

    @property
    def slurm_failure(self) -> tuple[str, str] | None:
        """(job id, state) when the run's newest SLURM job ended in failure; a resubmitted job
        that is running again supersedes an older failed one."""
        jobs = self.observation.live.slurm
        if not jobs:
            return None
        newest = max(jobs, key=lambda job: (job.isdigit(), int(job) if job.isdigit() else 0, job))
        state = jobs[newest].split()[0].rstrip("+")  # `CANCELLED by 0`, `FAILED+`
        return (newest, state) if state in SLURM_FAILED else None

    @property
    def crashed(self) -> bool:
        return bool(self.crash_events) or self.slurm_failure is not None

    @cached_property
    def finished_event(self) -> LogEvent | None:
        """The line saying training finished, unless the run was resumed after it. The
        orchestrator finishes before the trainer's last steps, so its line alone only counts
        once the trainer reached max_steps."""
        done = [e for e in self.of_kind("finished") if not any(_later(r, e) for r in self.of_kind("resumed"))]
        training = [e for e in done if _FINISHED_TRAINING.search(e.message)]
        if training:
            return training[-1]
        trainer = self.last_step("trainer")
        if done and self.config.max_steps and trainer is not None and trainer >= self.config.max_steps:
            return done[-1]
        return None

    @property
    def finished(self) -> bool:
        return self.finished_event is not None

    @property
    def stopped(self) -> bool:
        """Not training any more on purpose or by accident: finished or crashed."""
        return self.finished or self.crashed

    @property
    def live(self) -> bool:
        """The process probe ran (a live check-in); offline runs say nothing about processes."""
        return self.observation.live.processes is not None


def _later(a: LogEvent, b: LogEvent) -> bool:
    """Was line a written after line b? By time when both have one, else by position in one file."""
    if a.time is not None and b.time is not None:
        return aware(a.time) > aware(b.time)
    return a.file == b.file and a.line > b.line


def _key(event: LogEvent) -> tuple[str, int, str | None]:
    return event.file, event.line, event.kind
