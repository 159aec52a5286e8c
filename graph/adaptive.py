"""How often the fleet watcher checks a run: the cadence while it is Healthy, sooner while it is
Degraded or Down or its backlog is still being caught up, never again once it finished. Pure and
light (config.py imports it)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, field_validator

from rlagent.tools.textfmt import parse_cadence


class WatchSettings(BaseModel):
    """`[watch]` in the TOML, `RLAGENT_WATCH__*`, and `rlagent watch` flags."""

    workers: int = Field(8, ge=1, le=64)
    """Check-ins running at once (threads of one process: they overlap file and SQLite I/O)."""
    degraded_factor: float = Field(0.25, gt=0, le=1)
    """A Degraded or Down run, or one still catching up a backlog, is checked at this fraction of the cadence..."""
    min_cadence: str = "5m"
    """... but not more often than this (nor less often than the cadence itself)."""
    max_depth: int = Field(3, ge=0, le=10)
    """How deep under a root runs are looked for (a run's own folders are never searched)."""
    checkin_timeout: str = "2m"
    """A round waits this long for a check-in; a slower one goes on, and its run is skipped until it returns."""
    report: Path | None = None
    """Rewrite this HTML report after every round (`--report`)."""
    report_entries: int = Field(3, ge=0, le=200)
    """STATUS.md entries per run shown in the report."""

    @field_validator("min_cadence", "checkin_timeout")
    @classmethod
    def _duration(cls, value: str) -> str:
        parse_cadence(value)
        return value


def fast_cadence(cadence_s: float, settings: WatchSettings) -> float:
    """The cadence of a Degraded or Down run: a fraction of the cadence, floored, never slower."""
    return max(cadence_s * settings.degraded_factor, min(float(parse_cadence(settings.min_cadence)), cadence_s))


def interval(health: str | None, cadence_s: float, settings: WatchSettings, *, behind: bool = False) -> float:
    """Seconds until a run's next check-in, from its health now (None: the check-in failed) and whether
    it left part of a backlog for the next check-in (`behind`: caught up sooner, as a Degraded run is
    watched sooner)."""
    if health == "Healthy" and not behind:
        return cadence_s
    return fast_cadence(cadence_s, settings)
