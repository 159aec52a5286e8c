"""The reviewer protocol: what every reviewer sees and returns.

Each reviewer gets the same `ReviewPacket` (never another reviewer's verdict: they are
independent) and returns a `Verdict`: approve or reject with reasons. The rules reviewers here
implement it; Claude personas later implement the same `review()` and plug into the same slots.
A reviewer that fails (an exception, an LLM outage, a malformed answer) counts as a rejection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from rlagent.models.actions import CommandPlan, DispatchRecord, Proposal, Verdict
from rlagent.models.findings import Finding
from rlagent.models.observation import Observation
from rlagent.models.run import RunConfig, RunInfo


@dataclass(frozen=True)
class ReviewPacket:
    run: RunInfo
    proposal: Proposal
    plan: CommandPlan
    """The exact command that would be sent (or why none could be built)."""
    findings: list[Finding]
    config: RunConfig
    observation: Observation
    dispatches: list[DispatchRecord] = field(default_factory=list)
    """Commands rlagent sent to this run before (restart budget, loops)."""
    now: datetime | None = None

    @property
    def run_dir(self) -> Path:
        return Path(self.run.run_dir)

    @property
    def live(self) -> bool:
        return self.observation.live.processes is not None


class Reviewer(Protocol):
    name: str
    """Short name shown in the entry and the prompt (e.g. `evidence auditor`)."""
    duty: str
    """What it answers for, in a few words."""

    def review(self, packet: ReviewPacket) -> Verdict: ...
