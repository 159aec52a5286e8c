"""A diagnosed condition with its evidence; ids and thresholds are the contract of findings.md."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from rlagent.models.run import Category, Severity


class Finding(BaseModel):
    """One diagnosed condition; ids and thresholds are the public contract in findings.md."""

    id: str
    severity: Severity
    category: Category
    summary: str
    evidence: list[str] = Field(default_factory=list)
    """Exact log lines as `file:line: text`, or metric values as `metric @ step N = v`."""
    first_step: int | None = None
    last_step: int | None = None
    since: datetime | None = None
    """Check-in time when this finding was first reported and has persisted since."""
    checkins: int = 1
    """Consecutive check-ins that reported it."""
    source: Literal["rules", "llm"] = "rules"
    """Who found it: the rules, or Claude (with evidence rlagent checked on disk)."""


class FindingRecord(BaseModel):
    """A finding id as remembered between check-ins."""

    since: datetime
    checkins: int
