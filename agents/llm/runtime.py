"""The LLM dependency of the graph: whether Claude is on, its client (built on first use), and the
per-check-in `Session` shared by the diagnostician and the review personas.

Built once per monitor from settings and injected into the nodes (never a module global); a node
asks it for the check-in's session and hands that session on explicitly (the review personas get
it from the team_review node). The client is created lazily: a check-in that never calls Claude
never imports the SDK.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rlagent.models.llm import LLMRecord, LLMUsage
from rlagent.models.state import CheckinState
from rlagent.tools.llm.budget import Session, spent_on, upsert
from rlagent.tools.llm.client import AnthropicClient, LLMChoice, LLMSettings, ModelClient, choose
from rlagent.tools.untrusted import prose


@dataclass
class LLMRuntime:
    settings: LLMSettings
    choice: LLMChoice
    client_factory: Callable[[], ModelClient] | None = None
    """Builds the model client (tests pass a scripted one); default: the anthropic SDK."""
    clock: Callable[[], float] = time.monotonic
    _client: ModelClient | None = field(default=None, init=False, repr=False)
    _session: tuple[tuple[str, int], Session] | None = field(default=None, init=False, repr=False)

    @classmethod
    def from_settings(
        cls,
        settings: LLMSettings,
        environ: Mapping[str, str] = os.environ,
        client_factory: Callable[[], ModelClient] | None = None,
    ) -> LLMRuntime:
        return cls(settings=settings, choice=choose(settings.mode, environ), client_factory=client_factory)

    @property
    def enabled(self) -> bool:
        return self.choice.enabled

    @property
    def model(self) -> str:
        return self._client.model if self._client is not None else self.settings.model

    def client(self) -> ModelClient:
        if self._client is None:
            if self.client_factory is not None:
                self._client = self.client_factory()
            else:
                assert self.choice.api_key is not None
                self._client = AnthropicClient(
                    api_key=self.choice.api_key,
                    model=self.settings.model,
                    base_url=self.settings.base_url,
                    call_timeout_s=self.settings.call_timeout_s,
                )
        return self._client

    def session(self, state: CheckinState) -> Session | None:
        """This check-in's session (the same one across its nodes); None when Claude is off."""
        if not self.enabled:
            return None
        key = (state.run.run_dir, state.checkin)
        if self._session is not None and self._session[0] == key:
            return self._session[1]
        now = state.out.observation.now if state.out.observation else None
        earlier = [r for r in state.memory.llm_log if r.checkin != state.checkin]
        session = Session(self.client(), self.settings, spent_today_usd=spent_on(earlier, now) if now else 0.0, clock=self.clock)
        if state.out.llm is not None and state.out.llm.checkin == state.checkin:  # resumed mid-check-in
            session.usage, session.roles = state.out.llm.usage, dict(state.out.llm.roles)
            session.problems, session.notes = list(state.out.llm.problems), list(state.out.llm.notes)
        self._session = (key, session)
        return session

    def record(self, state: CheckinState, session: Session | None) -> dict[str, Any]:
        """The state update recording this check-in's use of Claude (also in the run's history)."""
        at = state.out.observation.now if state.out.observation else state.out.checked_at
        assert at is not None
        if session is None:
            record = LLMRecord(checkin=state.checkin, at=at, status="off", reason=self.choice.reason)
        else:
            record = session.record(state.checkin, at, self.model)
        return {"llm": record, "llm_log": upsert(state.memory.llm_log, record)}


# --- how it reads in the entry ------------------------------------------------------------------


def llm_line(record: LLMRecord | None) -> str:
    """The entry's `LLM:` note: off and why, unavailable and why, or the model and its tokens."""
    if record is None:
        return "LLM: off (rules only)"
    if record.status == "off":
        return f"LLM: off ({record.reason or 'not enabled'}; rules only)"
    usage = record.usage
    tokens = usage_text(usage) if usage.calls else "no call made"
    if record.status == "ok":
        return f"LLM: {record.model}; {tokens}."
    what = {"unavailable": "unavailable", "budget": "over budget", "invalid": "answer invalid"}[record.status]
    reasons = "; ".join(prose(p, 200) for p in record.problems[:3]) or prose(record.reason or "", 200)
    return f"LLM: {what} ({reasons}): rules only where it failed; {record.model}, {tokens}."


def usage_text(usage: LLMUsage) -> str:
    return (
        f"{usage.calls} call(s), input {usage.prompt_tokens:,} tokens ({usage.cache_read_input_tokens:,} from cache, "
        f"{usage.cache_creation_input_tokens:,} written to cache), output {usage.output_tokens:,}, ≈${usage.cost_usd:.3f}"
    )


def llm_report(record: LLMRecord | None) -> dict[str, Any]:
    """The JSON report's `llm` field: status, why, model, and this check-in's tokens and cost."""
    if record is None:
        return {"status": "off", "reason": "not configured", "model": None, "usage": LLMUsage().model_dump()}
    out = record.model_dump(mode="json", include={"status", "reason", "model", "problems", "usage", "roles"})
    out["usage"]["prompt_tokens"] = record.usage.prompt_tokens
    out["usage"]["cache_share"] = round(record.usage.cache_share, 3)
    return out


def day_usage(log: list[LLMRecord], day: datetime) -> LLMUsage:
    """Claude's usage over the check-ins of one UTC day (for `rlagent status` and the daily cap)."""
    total = LLMUsage()
    for record in log:
        if record.at.date() == day.date():
            total = total.plus(record.usage)
    return total
