"""A run's alert book: after every check-in (any command), its incidents, summary row and report
snapshot go to the run's state store; a fleet watcher also queues the notices.

Everything a check-in records is keyed by its number, so recording the same check-in twice (a
monitor restarted after a crash) changes nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from rlagent.agents.fleet_report import snapshot_of
from rlagent.agents.incidents import compose, track
from rlagent.models.fleet import RunSnapshot, RunSummary
from rlagent.models.incidents import AlertContext, Incident, Notice
from rlagent.models.state import CheckinState
from rlagent.tools.fleetdb import FleetDB
from rlagent.tools.notify import Destination, payload


def _wall() -> datetime:
    return datetime.now(UTC)


RETIRED = "retired"
SNAPSHOT = "snapshot"
RECORDED = "recorded_checkin"


@dataclass
class Recorded:
    """What one check-in changed, for the watcher."""

    snapshot: RunSnapshot
    changed: list[Incident] = field(default_factory=list)

    @property
    def summary(self) -> RunSummary:
        return self.snapshot.summary


class AlertBook:
    def __init__(self, conn: sqlite3.Connection, wall: Callable[[], datetime] = _wall) -> None:
        self.db = FleetDB(conn)
        self.wall = wall

    def context(self, *, retire_finished: bool = False) -> AlertContext:
        """Silences in force now and acknowledged open incidents: input of the next check-in."""
        acked = {fid: inc.acked_by for fid, inc in self.db.open_incidents().items() if inc.acked_by}
        return AlertContext(silences=self.db.silences(self.wall()), acked=acked, retire_finished=retire_finished)

    def record(self, state: CheckinState, *, plots: bool = False) -> Recorded:
        """Track the check-in's incidents and store its snapshot. The stored snapshot never holds
        plots (a report draws them from the history rows beside the checkpoint); the returned one
        does when `plots` asks, for a report rendered from memory (`rlagent watch --report`)."""
        obs = state.out.observation
        wall = self.wall()
        retire = state.alerts.retire_finished and any(f.id == "run_finished" for f in state.out.findings)
        changed: list[Incident] = []
        done = self.db.get(RECORDED)
        if obs is not None and (done is None or int(done) < state.checkin):
            step = obs.trainer_step if obs.trainer_step is not None else obs.orchestrator_step
            for incident in track(self.db.open_incidents(), state.out.findings, checkin=state.checkin, at=obs.now, step=step):
                changed.append(self.db.save_incident(incident))
            self.db.prune_resolved()
            self.db.put(RECORDED, str(state.checkin))
        snapshot = snapshot_of(state, self.db.incidents(), self.db.silences(wall), wall=wall, retired=retire, plots=plots)
        self.db.put(SNAPSHOT, snapshot.model_dump_json(exclude={"plots"}))
        if retire:
            self.db.put(RETIRED, snapshot.summary.model_dump_json())
        self.db.commit()
        return Recorded(snapshot=snapshot, changed=changed)

    def queue_notices(
        self, summary: RunSummary, destinations: Sequence[Destination], *, remind_after_s: float, finished: bool = False
    ) -> Notice | None:
        """Compose the run's notice from its incidents' state and queue it for every destination
        (one transaction: the incidents' announced flags and the outbox rows land together)."""
        if not destinations:
            return None
        now = self.wall()
        notice, changed = compose(
            summary,
            list(self.db.open_incidents().values()),
            self.db.unannounced_resolved(),
            self.db.silences(now),
            now=now,
            remind_after_s=remind_after_s,
            finished=finished,
        )
        for incident in changed:
            self.db.save_incident(incident)
        if notice is not None:
            for dest in destinations:
                self.db.enqueue(dest.id, payload(dest, notice), now)
        self.db.commit()
        return notice

    def snapshot(self) -> RunSnapshot | None:
        body = self.db.get(SNAPSHOT)
        return RunSnapshot.model_validate_json(body) if body else None
