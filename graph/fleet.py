"""The fleet watcher: every run under some roots, in one process.

Each round:
1. finds the runs again: a run is any folder `discover_run` accepts as a prime-rl run by itself,
   or that holds a verl, TRL or OpenRLHF run's own launch script or console log (`run_here`; a
   folder of several such runs is walked into); new ones are picked up, vanished ones
   dropped with a note, finished ones stay retired unless they show new activity;
2. starts the check-ins that are due on a bounded pool of threads and waits for them at most
   `checkin_timeout`: a check-in that raises is noted and retried sooner, one that hangs keeps
   its thread while the others go on (its run is skipped until it returns);
3. schedules each run's next check-in from its health (`cadence.interval`);
4. queues notices in each run's outbox (in the run's own check-in thread) and posts what is
   queued on the notifier's threads, without waiting: what a round could not deliver is posted
   again the next round;
5. rewrites the HTML report, when asked.

Per-run state stays in each run's own store; the watcher keeps only small things in memory (the
open Monitor, the latest snapshot, timings).
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from loguru import logger

from rlagent.graph.adaptive import WatchSettings, interval
from rlagent.graph.fleetview import activity_time, find_runs, read_snapshot, write_report
from rlagent.graph.runner import DecisionPending, Monitor
from rlagent.models.fleet import RunSnapshot, RunSummary
from rlagent.models.run import RunInfo
from rlagent.tools.fleetdb import OutboxRow
from rlagent.tools.notify import DeliveryError, Destination, NotifySettings, deliver
from rlagent.tools.pool import DaemonPool
from rlagent.tools.textfmt import parse_cadence

# --- the watcher -----------------------------------------------------------------------------


@dataclass
class Outcome:
    """One run's check-in in a round."""

    run: RunInfo
    seconds: float
    summary: RunSummary | None = None
    error: str | None = None
    pending: str | None = None
    """A decision waits for a person: no check-in was made."""
    retired: bool = False
    outbox: list[OutboxRow] = field(default_factory=list)


@dataclass
class RoundReport:
    number: int
    started: datetime
    seconds: float = 0.0
    """Discovery, check-ins and notifications (the report, when written, is `report_seconds`)."""
    runs: int = 0
    outcomes: list[Outcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    still_running: list[str] = field(default_factory=list)
    delivered: int = 0
    failed_deliveries: int = 0
    report_seconds: float | None = None
    next_in: float | None = None


@dataclass
class _Slot:
    run: RunInfo
    monitor: Monitor | None = None
    due: float = 0.0
    future: Future | None = None
    started: float = 0.0
    snapshot: RunSnapshot | None = None
    retired_at: float | None = None
    """Wall time (epoch) it was retired, when it finished."""
    outbox: dict[int, OutboxRow] = field(default_factory=dict)
    gone: bool = False


class Watcher:
    def __init__(
        self,
        roots: Sequence[str | os.PathLike],
        *,
        home: Path,
        cadence_s: float,
        settings: WatchSettings | None = None,
        notify: NotifySettings | None = None,
        destinations: Sequence[Destination] = (),
        make_monitor: Callable[[RunInfo], Monitor],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.roots = list(roots)
        self.home = Path(home)
        self.cadence_s = cadence_s
        self.settings = settings or WatchSettings()
        self.notify = notify or NotifySettings()
        self.destinations = {d.id: d for d in destinations}
        self.remind_after_s = float(parse_cadence(self.notify.remind_every))
        self.make_monitor = make_monitor
        self.clock = clock
        self.slots: dict[str, _Slot] = {}
        self.pool = DaemonPool(self.settings.workers, "rlagent-checkin")
        self.notifier = DaemonPool(4, "rlagent-notify") if destinations else None
        self.deliveries: dict[tuple[str, int], Future] = {}
        self.rounds = 0

    # --- one round ------------------------------------------------------------------------

    def round(self) -> RoundReport:
        self.rounds += 1
        started = self.clock()
        report = RoundReport(number=self.rounds, started=datetime.now(UTC))
        self._collect_deliveries(report)
        found, notes = find_runs(self.roots, self.settings.max_depth)
        report.notes += notes
        self._reconcile(found, report)
        report.runs = sum(1 for s in self.slots.values() if not s.gone)
        # check-ins that outlived an earlier round and have now returned
        for slot in self.slots.values():
            if slot.future is not None and slot.future.done():
                self._settle(slot, report)
        due = [s for s in self.slots.values() if not s.gone and s.future is None and s.retired_at is None and s.due <= started]
        for slot in due:
            slot.started = self.clock()
            slot.future = self.pool.submit(lambda slot=slot: self._check(slot))
        if due:
            wait_futures([s.future for s in due if s.future], timeout=parse_cadence(self.settings.checkin_timeout))
        for slot in due:
            if slot.future is not None and slot.future.done():
                self._settle(slot, report)
        for slot in self.slots.values():
            if slot.future is not None and not slot.future.done():
                report.still_running.append(f"{slot.run.name} (check-in running for {self.clock() - slot.started:.0f}s)")
        changed = self._drop_gone() or bool(report.new)
        self._post_deliveries(report)
        if changed or self.rounds == 1:
            self._settle_memory()
        report.seconds = self.clock() - started
        if self.settings.report is not None:
            try:
                report.report_seconds = write_report(
                    self.settings.report,
                    [s.snapshot for s in self.slots.values() if s.snapshot is not None and not s.gone],
                    title="rlagent: " + ", ".join(Path(r).resolve().name or str(r) for r in self.roots),
                    subtitle=", ".join(str(Path(r).resolve()) for r in self.roots),
                    entries=self.settings.report_entries,
                    notes=report.notes + [f"{n}: gone (deleted or moved), dropped" for n in report.gone],
                )
            except OSError as exc:
                report.notes.append(f"report {self.settings.report}: not written ({exc.strerror or exc})")
        report.next_in = self.next_in()
        return report

    @staticmethod
    def _settle_memory() -> None:
        """After the set of monitors changed: collect, then freeze what survives (the monitors, their
        compiled graphs, the modules) out of the cyclic GC's way. Every check-in allocates many
        short-lived objects; without this, each collection walks a hundred monitors' objects
        again (a warm round of 100 runs: about 25% of its time)."""
        gc.unfreeze()
        gc.collect()
        gc.freeze()

    def next_in(self) -> float:
        """Seconds until the next round: the earliest due run, or a fast-cadence tick at most
        (new runs are found on every round)."""
        from rlagent.graph.adaptive import fast_cadence

        now = self.clock()
        tick = fast_cadence(self.cadence_s, self.settings)
        dues = [s.due for s in self.slots.values() if not s.gone and s.retired_at is None and s.future is None]
        upcoming = min([*dues, now + tick])
        return max(0.2, min(upcoming - now, tick))

    def _reconcile(self, found: list[RunInfo], report: RoundReport) -> None:
        present = {r.run_dir: r for r in found}
        for run_dir, run in present.items():
            slot = self.slots.get(run_dir)
            if slot is None:
                slot = self.slots[run_dir] = _Slot(run=run)
                snapshot, retired = read_snapshot(self.home, run_dir, plots=self.settings.report is not None)
                slot.snapshot = snapshot
                if retired is not None:
                    when = (retired.checked_wall or datetime.now(UTC)).timestamp()
                    if activity_time(run_dir) <= when:
                        slot.retired_at = when
                report.new.append(run.name + (" (finished earlier: retired)" if slot.retired_at else ""))
            elif slot.retired_at is not None and activity_time(run_dir) > slot.retired_at:
                slot.retired_at = None
                slot.due = 0.0
                report.notes.append(f"{run.name}: new activity after it finished: watching it again")
        for run_dir, slot in self.slots.items():
            if run_dir not in present and not slot.gone and not Path(run_dir).is_dir():
                slot.gone = True
                report.gone.append(slot.run.name)
                report.notes.append(f"{slot.run.name}: run directory gone (deleted or moved): dropped ({run_dir})")

    def _drop_gone(self) -> bool:
        dropped = [d for d, s in self.slots.items() if s.gone and s.future is None]
        for run_dir in dropped:
            slot = self.slots.pop(run_dir)
            if slot.monitor is not None:
                slot.monitor.close()
        return bool(dropped)

    def _check(self, slot: _Slot) -> Outcome:
        """One run's check-in, on a pool thread (the only thread touching its monitor meanwhile)."""
        started = time.perf_counter()
        if slot.monitor is None:
            slot.monitor = self.make_monitor(slot.run)
            slot.monitor.plots = self.settings.report is not None  # the report is rendered from the snapshots in memory
        monitor = slot.monitor
        try:
            monitor.check_in()
        except DecisionPending as exc:
            return Outcome(run=slot.run, seconds=time.perf_counter() - started, pending=str(exc))
        recorded = monitor.recorded
        assert recorded is not None
        summary = recorded.summary
        slot.snapshot = recorded.snapshot
        destinations = list(self.destinations.values())
        monitor.book.queue_notices(summary, destinations, remind_after_s=self.remind_after_s, finished=summary.retired)
        outbox = monitor.book.db.undelivered() if destinations else []
        return Outcome(
            run=slot.run, seconds=time.perf_counter() - started, summary=summary, retired=summary.retired, outbox=outbox
        )

    def _settle(self, slot: _Slot, report: RoundReport) -> None:
        future, slot.future = slot.future, None
        assert future is not None
        health, behind = None, False
        try:
            outcome: Outcome = future.result()
        except Exception as exc:
            logger.opt(exception=exc).debug("check-in of {} failed", slot.run.run_dir)
            outcome = Outcome(run=slot.run, seconds=self.clock() - slot.started, error=f"{type(exc).__name__}: {exc}"[:300])
            report.notes.append(f"{slot.run.name}: check-in failed ({outcome.error}); tried again sooner")
        else:
            health = outcome.summary.health if outcome.summary else "Healthy"
            behind = outcome.summary.behind if outcome.summary else False
            for row in outcome.outbox:
                slot.outbox.setdefault(row.id, row)
            if outcome.retired:
                slot.retired_at = time.time()
        slot.due = slot.started + interval(health, self.cadence_s, self.settings, behind=behind)
        report.outcomes.append(outcome)

    # --- notifications --------------------------------------------------------------------

    def _post_deliveries(self, report: RoundReport) -> None:
        if self.notifier is None:
            return
        for slot in self.slots.values():
            for row in list(slot.outbox.values()):
                key = (slot.run.run_dir, row.id)
                if key in self.deliveries:
                    continue  # still being tried from an earlier round
                dest = self.destinations.get(row.dest)
                if dest is None:
                    continue  # a destination no longer configured: kept until it is again
                self.deliveries[key] = self.notifier.submit(lambda dest=dest, body=row.body: deliver(dest, body, self.notify))

    def _collect_deliveries(self, report: RoundReport) -> None:
        for key, future in list(self.deliveries.items()):
            if not future.done():
                continue
            run_dir, row_id = key
            slot = self.slots.get(run_dir)
            if slot is None or slot.monitor is None or slot.future is not None:
                continue  # its run is checking in (its store is busy): next round
            del self.deliveries[key]
            row = slot.outbox.get(row_id)
            if row is None:
                continue
            dest = self.destinations.get(row.dest)
            label = dest.label if dest else "a webhook"
            error = future.exception()
            db = slot.monitor.book.db
            if error is None:
                db.delivery_done(row_id, ok=True)
                del slot.outbox[row_id]
                report.delivered += 1
                continue
            message = str(error) if isinstance(error, DeliveryError) else type(error).__name__
            report.failed_deliveries += 1
            rounds = row.rounds + 1
            if rounds >= self.notify.max_rounds:
                db.drop(row_id)
                del slot.outbox[row_id]
                report.notes.append(f"{slot.run.name}: notification to {label} dropped after {rounds} rounds ({message})")
            else:
                db.delivery_done(row_id, ok=False, error=message)
                slot.outbox[row_id] = row.model_copy(update={"rounds": rounds, "last_error": message})
                report.notes.append(f"{slot.run.name}: notification to {label} failed ({message}); tried again next round")

    def flush(self, timeout_s: float) -> RoundReport:
        """Wait (bounded) for deliveries in flight and record them (before exit: what is still in
        flight stays queued in the runs' outboxes for the next watch)."""
        report = RoundReport(number=self.rounds, started=datetime.now(UTC))
        if self.deliveries:
            wait_futures(list(self.deliveries.values()), timeout=timeout_s)
            self._collect_deliveries(report)
        report.still_running = [f"{run_dir} #{row}" for run_dir, row in self.deliveries]
        return report

    # --- the loop -------------------------------------------------------------------------

    def in_flight(self) -> int:
        return sum(1 for s in self.slots.values() if s.future is not None and not s.future.done())

    def cancel_queued(self) -> int:
        """Cancel the check-ins still waiting for a worker (nothing of them has run: Ctrl-C need not
        wait for a round's hundred queued check-ins, only for the few running); returns how many."""
        return sum(1 for s in self.slots.values() if s.future is not None and s.future.cancel())

    def finish(self, timeout_s: float) -> None:
        """Wait (bounded) for the check-ins in progress: their entries are written whole."""
        running = [s.future for s in self.slots.values() if s.future is not None]
        if running:
            wait_futures(running, timeout=timeout_s)

    def close(self) -> None:
        for slot in self.slots.values():
            if slot.monitor is not None and (slot.future is None or slot.future.done()):
                slot.monitor.close()
