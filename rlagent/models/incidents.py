"""Alert hygiene: incidents (one finding id on one run, from the check-in that first reported it to
the one where it is gone), silences and acknowledgements, and what a notification says.

An incident is level-triggered bookkeeping: whether its opening and its resolution were announced
is part of it, so a notification is decided from the incident's state, never from one check-in's
diff alone (a crash between a check-in and its notification loses nothing and sends nothing twice).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from rlagent.models.run import Severity

ALL_FINDINGS = "*"
"""A silence for every finding id of a run."""


class IncidentStatus(StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"


class Incident(BaseModel):
    """One finding id on one run while it is reported."""

    id: int = 0
    """Row id in the run's state store (0 before it is saved)."""
    finding_id: str
    status: IncidentStatus = IncidentStatus.OPEN
    severity: Severity
    """The worst severity it reached."""
    summary: str
    """The newest summary of the finding."""
    opened_at: datetime
    """Time of the check-in that first reported it (the run's clock: a recorded run's newest line)."""
    opened_checkin: int
    first_step: int | None = None
    """Step the condition started at, as the finding gave it."""
    last_checkin: int
    last_step: int | None = None
    resolved_at: datetime | None = None
    resolved_checkin: int | None = None
    resolved_step: int | None = None
    acked_by: str | None = None
    acked_at: datetime | None = None
    announced_open: bool = False
    """Its opening was put in a notification (queued for delivery)."""
    announced_resolved: bool = False
    """Its resolution was put in a notification, or needs none (never announced open, or silenced)."""
    last_announced: datetime | None = None
    """Wall time of the newest notification about it (opening or reminder)."""
    reminders: int = 0

    @property
    def open(self) -> bool:
        return self.status is IncidentStatus.OPEN


class Silence(BaseModel):
    """No notification about a finding id (or every one: `*`) of a run until `until`."""

    id: int = 0
    finding_id: str
    until: datetime
    reason: str
    by: str
    created_at: datetime

    def covers(self, finding_id: str, now: datetime) -> bool:
        return now < self.until and self.finding_id in (finding_id, ALL_FINDINGS)


class AlertContext(BaseModel):
    """What a check-in's entry must say about alerting (input of each check-in, set by the monitor)."""

    silences: list[Silence] = Field(default_factory=list)
    """Silences in force when the check-in started."""
    acked: dict[str, str] = Field(default_factory=dict)
    """Finding id -> who acknowledged its open incident."""
    retire_finished: bool = False
    """A fleet watcher runs this check-in: a finished run gets its final entry and is retired."""

    def silence_for(self, finding_id: str) -> Silence | None:
        """The silence (already known to be in force) covering a finding id, if any."""
        return next((s for s in self.silences if s.finding_id in (finding_id, ALL_FINDINGS)), None)

    def mark(self, finding_id: str) -> str | None:
        """How the STATUS.md entry marks a finding nobody is notified about, or that someone took."""
        silence = self.silence_for(finding_id)
        if silence is not None:
            return f"silenced until {silence.until:%Y-%m-%d %H:%M} UTC by {silence.by}: {silence.reason}"
        if finding_id in self.acked:
            return f"acknowledged by {self.acked[finding_id]}"
        return None


NoticeKind = Literal["opened", "resolved", "reminder"]


class NoticeItem(BaseModel):
    kind: NoticeKind
    finding_id: str
    severity: Severity
    summary: str
    since: datetime
    step: int | None = None


class Notice(BaseModel):
    """One notification: everything about one run from one check-in (or round), grouped."""

    run: str
    run_dir: str
    health: str | None = None
    step: int | None = None
    max_steps: int | None = None
    checkin: int
    items: list[NoticeItem] = Field(default_factory=list)
    finished: bool = False
    """The run finished and the watcher retired it."""
    created_at: datetime

    def text(self) -> str:
        """The message as chat services show it (Slack/Discord `text`): plain, a few lines."""
        head = f"rlagent: {self.run}"
        if self.health:
            head += f" is {self.health}"
        if self.step is not None:
            head += f" at step {self.step}" + (f"/{self.max_steps}" if self.max_steps else "")
        lines = [head]
        label = {"opened": "NEW", "resolved": "RESOLVED", "reminder": "STILL OPEN"}
        for item in self.items:
            lines.append(f"- {label[item.kind]} [{item.severity.value}] {item.finding_id}: {item.summary[:300]}")
        if self.finished:
            lines.append("- the run finished; no further check-ins")
        lines.append(f"({self.run_dir}, check-in #{self.checkin})")
        return "\n".join(lines)
