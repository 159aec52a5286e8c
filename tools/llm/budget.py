"""What Claude costs a check-in, and the limits that keep it bounded.

A `Session` is one check-in's use of Claude, shared by the diagnostician and the reviewers:
- a wall-time budget for all its calls, and each call's retrying capped by the time left;
- caps on tokens and money per check-in and money per day, checked *before* a call with its
  worst case (the whole request at the uncached price plus `max_tokens` of output);
- a breaker: once Claude is unavailable in a check-in, later calls fail at once instead of
  each waiting out its own retry budget, so an outage costs a check-in one retry budget, not five;
- usage per role (input, output, cache read, cache write, USD), which goes to the run's history.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from rlagent.models.llm import LLMRecord, LLMUsage
from rlagent.tools.llm.client import (
    LLMBudgetExceeded,
    LLMError,
    LLMSettings,
    ModelClient,
    Prices,
    Reply,
    TokenUsage,
    estimate_tokens,
)

_WORST = {"ok": 0, "invalid": 1, "budget": 2, "unavailable": 3}
MIN_CALL_S = 2.0
"""A call is not started with less check-in time than this left."""


def usage_of(tokens: TokenUsage, prices: Prices, ttl: str) -> LLMUsage:
    read, written = tokens.cache_read_input_tokens or 0, tokens.cache_creation_input_tokens or 0
    write_price = prices.cache_write_1h if ttl == "1h" else prices.cache_write_5m
    cost = (
        tokens.input_tokens * prices.input
        + tokens.output_tokens * prices.output
        + read * prices.cache_read
        + written * write_price
    ) / 1e6
    return LLMUsage(
        calls=1,
        input_tokens=tokens.input_tokens,
        output_tokens=tokens.output_tokens,
        cache_read_input_tokens=read,
        cache_creation_input_tokens=written,
        cost_usd=round(cost, 6),
    )


def spent_on(log: list[LLMRecord], day: datetime) -> float:
    """USD spent by the check-ins of the same UTC day (the daily cap)."""
    return sum(r.usage.cost_usd for r in log if r.at.date() == day.date())


def upsert(log: list[LLMRecord], record: LLMRecord, keep: int = 500) -> list[LLMRecord]:
    """The history with this check-in's record replaced or appended (bounded)."""
    kept = [r for r in log if r.checkin != record.checkin]
    return [*kept, record][-keep:]


class Session:
    """One check-in's calls to Claude, within its budgets."""

    def __init__(
        self,
        client: ModelClient,
        settings: LLMSettings,
        *,
        spent_today_usd: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.settings = settings
        self.spent_today = spent_today_usd
        self.clock = clock
        self.deadline = clock() + settings.checkin_time_budget_s
        self.usage = LLMUsage()
        self.roles: dict[str, LLMUsage] = {}
        self.problems: list[str] = []
        self.status = "ok"
        self.notes: list[str] = []
        self._down: LLMError | None = None

    def call(self, role: str, request: dict[str, Any]) -> Reply:
        """One Messages API call for `role`; raises an LLMError instead of exceeding a budget."""
        if self._down is not None:
            raise type(self._down)(f"not tried after: {self._down.reason}")
        self._check_budget(request)
        left = self.deadline - self.clock()
        try:
            reply = self.client.create(request, budget_s=min(self.settings.retry_budget_s, left))
        except LLMError as exc:
            self._down = exc
            raise
        spent = usage_of(reply.usage, self.settings.prices, self.settings.cache_ttl)
        self.usage = self.usage.plus(spent)
        self.roles[role] = self.roles.get(role, LLMUsage()).plus(spent)
        return reply

    def _check_budget(self, request: dict[str, Any]) -> None:
        s = self.settings
        left = self.deadline - self.clock()
        if left < MIN_CALL_S:
            raise LLMBudgetExceeded(f"the check-in's LLM time budget ({s.checkin_time_budget_s:g} s) is spent")
        prompt = estimate_tokens(request)
        worst_out = int(request.get("max_tokens", s.max_output_tokens))
        if self.usage.total_tokens + prompt + worst_out > s.max_tokens_per_checkin:
            raise LLMBudgetExceeded(f"the check-in's token cap ({s.max_tokens_per_checkin:,}) would be exceeded")
        worst_usd = (prompt * max(s.prices.input, s.prices.cache_write_1h) + worst_out * s.prices.output) / 1e6
        if self.usage.cost_usd + worst_usd > s.max_usd_per_checkin:
            raise LLMBudgetExceeded(f"the check-in's cost cap (${s.max_usd_per_checkin:.2f}) would be exceeded")
        if self.spent_today + self.usage.cost_usd + worst_usd > s.max_usd_per_day:
            raise LLMBudgetExceeded(f"the daily cost cap (${s.max_usd_per_day:.2f}) is reached")

    @property
    def down(self) -> bool:
        """Claude failed earlier in this check-in: later calls are not tried."""
        return self._down is not None

    def failed(self, role: str, exc: LLMError) -> None:
        """Note that `role` went on without Claude, and why."""
        self.problems.append(f"{role}: {exc.reason}")
        if _WORST.get(exc.status, 3) > _WORST.get(self.status, 0):
            self.status = exc.status

    def record(self, checkin: int, at: datetime, model: str | None) -> LLMRecord:
        first = self.problems[0] if self.problems else None
        return LLMRecord(
            checkin=checkin,
            at=at,
            status=self.status,  # type: ignore[arg-type]
            model=model,
            reason=first,
            usage=self.usage,
            roles=dict(self.roles),
            problems=list(self.problems),
            notes=list(self.notes),
        )


def summarise(records: list[LLMRecord | dict[str, Any]]) -> dict[str, Any]:
    """Claude's use over many check-ins (an eval run): calls, tokens, cache share, cost, and how
    many check-ins were ok, off or degraded. Takes LLMRecords or the JSON report's `llm` fields.
    `rlagent eval --llm claude` prints this next to the rules-only scoreboard."""
    total = LLMUsage()
    statuses: dict[str, int] = {}
    used = 0
    for record in records:
        status, usage = (
            (record.status, record.usage)
            if isinstance(record, LLMRecord)
            else (record["status"], LLMUsage.model_validate(record["usage"]))
        )
        total = total.plus(usage)
        statuses[status] = statuses.get(status, 0) + 1
        used += usage.calls > 0
    return {
        "checkins": len(records),
        "statuses": statuses,
        "calls": total.calls,
        "input_tokens": total.prompt_tokens,
        "cache_read_input_tokens": total.cache_read_input_tokens,
        "cache_creation_input_tokens": total.cache_creation_input_tokens,
        "output_tokens": total.output_tokens,
        "cache_share": round(total.cache_share, 3),
        "cost_usd": round(total.cost_usd, 4),
        "cost_per_checkin_usd": round(total.cost_usd / used, 4) if used else 0.0,
    }
