"""What a fleet view needs of one run: a summary row (status table) and a snapshot (HTML report),
both small and saved in the run's state store after each check-in, so `rlagent status ROOT` and
`rlagent report ROOT` read them without loading LangGraph or the run's full history."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from rlagent.models.incidents import Incident, Silence


class RunSummary(BaseModel):
    """One row of the fleet table."""

    run_dir: str
    name: str
    framework: str = "prime-rl"
    layout: str | None = None
    health: str | None = None
    step: int | None = None
    max_steps: int | None = None
    steps_per_hour: float | None = None
    """From the median of the last 10 trainer step times."""
    eta_s: float | None = None
    checkin: int = 0
    checked_at: datetime | None = None
    """Time of the check-in on the run's clock (a recorded run: its newest line)."""
    checked_wall: datetime | None = None
    """When the check-in ran (this machine's clock)."""
    findings: list[str] = Field(default_factory=list)
    finished: bool = False
    retired: bool = False
    behind: bool = False
    """Its last check-in left part of a backlog for the next (Observation.behind): checked again sooner."""


class Mark(BaseModel):
    """Something placed on the step axis of every plot of a run."""

    kind: Literal["finding", "restart"]
    step: int
    label: str
    severity: str = "info"


class Series(BaseModel):
    name: str
    points: list[tuple[int, float]]
    """(step, value), step order, finite values only, downsampled to a bounded count."""
    nonfinite_steps: list[int] = Field(default_factory=list)
    """Steps where the value was NaN or inf (drawn as ticks on the axis)."""


class Plot(BaseModel):
    key: str
    title: str
    unit: str = ""
    series: list[Series] = Field(default_factory=list)


class FindingView(BaseModel):
    id: str
    severity: str
    summary: str
    evidence: list[str] = Field(default_factory=list)
    first_step: int | None = None
    silenced: str | None = None
    """Why no notification is sent about it, when silenced."""


class RunSnapshot(BaseModel):
    """Everything the HTML report shows of a run."""

    summary: RunSummary
    plots: list[Plot] = Field(default_factory=list)
    marks: list[Mark] = Field(default_factory=list)
    findings: list[FindingView] = Field(default_factory=list)
    incidents: list[Incident] = Field(default_factory=list)
    silences: list[Silence] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
