"""What Claude cost and did in a check-in: kept in the run's memory and shown in the entry and report."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

LLMStatus = Literal["off", "ok", "unavailable", "budget", "invalid"]
"""off: not enabled; ok: every call answered; otherwise the worst thing that happened."""


class LLMUsage(BaseModel):
    """Tokens and cost of some calls (one role, or a whole check-in)."""

    calls: int = 0
    input_tokens: int = 0
    """Uncached input tokens."""
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def prompt_tokens(self) -> int:
        """All input tokens, however they were served."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens

    @property
    def cache_share(self) -> float:
        """Share of input tokens read from the cache."""
        return self.cache_read_input_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def plus(self, other: LLMUsage) -> LLMUsage:
        return LLMUsage(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            cost_usd=round(self.cost_usd + other.cost_usd, 6),
        )


class LLMRecord(BaseModel):
    """One check-in's use of Claude, kept in the run's history and shown in the entry and report."""

    checkin: int
    at: datetime
    status: LLMStatus
    model: str | None = None
    reason: str | None = None
    """Why off, or what went wrong (the first problem)."""
    usage: LLMUsage = Field(default_factory=LLMUsage)
    roles: dict[str, LLMUsage] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list)
    """Each degradation, `role: reason` (the check-in went on with the rules for that role)."""
    notes: list[str] = Field(default_factory=list)
    """Claude's reading for the entry's Notes (sanitised), and what of its answer was dropped and why."""
