"""The Claude client: one retry layer, a per-call timeout, typed replies, and a scripted stand-in.

Why it looks like this:
- The anthropic SDK costs ~2 s to import, so it is imported inside the first call, never at
  module import: `rlagent check --llm off` does not pay for it.
- One retry layer only. The SDK's own retries are off (`max_retries=0`); tenacity retries
  408/429/5xx/529, connection errors and timeouts with exponential backoff and jitter, honours
  `retry-after` as long as it fits the time left, and gives up when the next attempt would end
  past the call's time budget. Any other 4xx fails at once. LangGraph node retries are not used
  on top (their default retries every anthropic error, 400s included).
- Every failure becomes `LLMUnavailable` with a reason a person can read in STATUS.md; the
  check-in then goes on with the rules (DESIGN.md rule 5).
- Replies are normalised to small pydantic models so `ScriptedClient` (a queue of canned answers,
  no HTTP) can stand in for Claude in tests of routing, repairs and revision rounds.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_MODEL = "claude-sonnet-5-5"
"""The newest Sonnet in the installed SDK's `anthropic.types.Model` literals and not in its
DEPRECATED_MODELS (claude-sonnet-4-5 reaches end of life 2026-11-30); the SDK's own examples use it."""

LLMMode = Literal["auto", "claude", "off"]
CacheTTL = Literal["5m", "1h"]
CHARS_PER_TOKEN = 3.5
"""Token estimate used before a call (no tokenizer offline): conservative for English and JSON."""


class Prices(BaseModel):
    """USD per million tokens, for the cost figures and caps (list prices of a Sonnet; configurable)."""

    model_config = ConfigDict(extra="forbid")

    input: float = 3.0
    output: float = 15.0
    cache_write_5m: float = 3.75
    cache_write_1h: float = 6.0
    cache_read: float = 0.30


class LLMSettings(BaseModel):
    """How rlagent may use Claude (`[llm]` in the TOML, `RLAGENT_LLM__*`, `--llm`)."""

    model_config = ConfigDict(extra="forbid")

    mode: LLMMode = "auto"
    """auto: on when ANTHROPIC_API_KEY is set; claude: on (a missing key is reported); off: rules only."""
    model: str = DEFAULT_MODEL
    base_url: str | None = None
    """Default: ANTHROPIC_BASE_URL, else the SDK's."""
    call_timeout_s: float = Field(45.0, gt=0, le=600)
    """Timeout of one HTTP attempt."""
    retry_budget_s: float = Field(60.0, gt=0, le=900)
    """Longest time one call may spend retrying an outage, overload or rate limit."""
    checkin_time_budget_s: float = Field(180.0, gt=0, le=3600)
    """Wall time all of a check-in's calls may take together."""
    max_output_tokens: int = Field(2048, ge=256, le=16384)
    max_input_tokens: int = Field(12000, ge=4000, le=200000)
    """Per call: the prompt is compacted (and tool results elided) to stay under it."""
    max_tool_rounds: int = Field(4, ge=0, le=8)
    """Read-only tool rounds the diagnostician may take before it must answer."""
    max_tokens_per_checkin: int = Field(150_000, ge=1000)
    max_usd_per_checkin: float = Field(0.50, gt=0)
    max_usd_per_day: float = Field(5.00, gt=0)
    cache_ttl: CacheTTL = "1h"
    """TTL of the cached static prompt: 1h outlives an hourly cadence's gap better than 5m."""
    prices: Prices = Field(default_factory=Prices)


# --- errors -------------------------------------------------------------------------------


class LLMError(Exception):
    """Claude could not help this time; `reason` is one line for STATUS.md."""

    status = "unavailable"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class LLMUnavailable(LLMError):
    """Outage, overload, rate limit, timeout, or a refused request."""


class LLMBudgetExceeded(LLMError):
    """The check-in's (or the day's) time, token or money budget would be exceeded."""

    status = "budget"


class LLMInvalidAnswer(LLMError):
    """The answer did not validate, even after one repair attempt."""

    status = "invalid"


# --- replies ------------------------------------------------------------------------------


class TokenUsage(BaseModel):
    """Usage of one reply, as the Messages API reports it."""

    model_config = ConfigDict(extra="ignore")

    input_tokens: int = 0
    """Input tokens neither read from nor written to the cache."""
    output_tokens: int = 0
    cache_read_input_tokens: int | None = 0
    cache_creation_input_tokens: int | None = 0


class ContentBlock(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: Any = None

    def wire(self) -> dict[str, Any]:
        """The block as it goes back to the API in the assistant turn."""
        if self.type == "tool_use":
            return {"type": "tool_use", "id": self.id, "name": self.name, "input": self.input}
        if self.type == "text":
            return {"type": "text", "text": self.text or ""}
        return self.model_dump(exclude_none=True)


class Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str = ""
    model: str = ""
    content: list[ContentBlock] = Field(default_factory=list)
    stop_reason: str | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)

    def tool_uses(self) -> list[ContentBlock]:
        return [b for b in self.content if b.type == "tool_use"]

    def text(self) -> str:
        return "\n".join(b.text or "" for b in self.content if b.type == "text")


class ModelClient(Protocol):
    """What the agents need of a model: one Messages API call within a time budget."""

    model: str

    def create(self, request: dict[str, Any], *, budget_s: float) -> Reply: ...


def estimate_tokens(payload: object) -> int:
    """Tokens of a request or text, estimated from its characters (see CHARS_PER_TOKEN)."""
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, default=str)
    return math.ceil(len(text) / CHARS_PER_TOKEN)


# --- mode ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LLMChoice:
    enabled: bool
    reason: str
    """Why it is on or off, in words."""
    api_key: str | None = None


def choose(mode: LLMMode, environ: Mapping[str, str]) -> LLMChoice:
    """Whether this process uses Claude: `auto` only with a key; `claude` without a key is off
    with a reason (the check-in still runs on the rules), never an error that stops it."""
    key = environ.get("ANTHROPIC_API_KEY") or None
    if mode == "off":
        return LLMChoice(False, "--llm off")
    if key is None:
        return LLMChoice(False, "no ANTHROPIC_API_KEY" if mode == "auto" else "--llm claude, but ANTHROPIC_API_KEY is not set")
    return LLMChoice(True, "ANTHROPIC_API_KEY set" if mode == "auto" else "--llm claude", api_key=key)


# --- the real client ----------------------------------------------------------------------


def _is_transient(exc: BaseException) -> bool:
    import anthropic

    return isinstance(
        exc,
        anthropic.RateLimitError | anthropic.InternalServerError | anthropic.APIConnectionError | anthropic.RequestTimeoutError,
    )


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds a 429/503/529 asks us to wait (`retry-after-ms` or `retry-after`), if it says."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            continue
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None


def describe_failure(exc: BaseException, call_timeout_s: float) -> str:
    import anthropic

    if isinstance(exc, anthropic.OverloadedError):
        return "overloaded (HTTP 529)"
    if isinstance(exc, anthropic.RateLimitError):
        return "rate limited (HTTP 429)"
    if isinstance(exc, anthropic.APITimeoutError):
        return f"timed out (per-call timeout {call_timeout_s:g} s)"
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return f"connection failed ({type(cause).__name__ if cause else 'no response'})"
    if isinstance(exc, anthropic.APIStatusError):
        kind = "server error" if exc.status_code >= 500 else "request refused"
        detail = getattr(exc, "type", None) or ""
        return f"{kind} (HTTP {exc.status_code}{': ' + detail if detail else ''})"
    return f"{type(exc).__name__}"


@dataclass
class AnthropicClient:
    """The Messages API through the anthropic SDK, with rlagent's single retry layer."""

    api_key: str
    model: str = DEFAULT_MODEL
    base_url: str | None = None
    call_timeout_s: float = 45.0
    backoff_s: float = 1.0
    """First backoff (doubling, plus up to this much jitter)."""
    max_backoff_s: float = 8.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    attempts: int = field(default=0, init=False)
    """HTTP attempts of the last call (for tests and logs)."""
    _sdk: Any = field(default=None, init=False, repr=False)

    def _client(self) -> Any:
        if self._sdk is None:
            import anthropic  # ~2 s: only once a check-in really calls Claude

            # api_key given explicitly: the SDK then reads no profile or federation config.
            self._sdk = anthropic.Anthropic(
                api_key=self.api_key, base_url=self.base_url, max_retries=0, timeout=self.call_timeout_s
            )
        return self._sdk

    def create(self, request: dict[str, Any], *, budget_s: float) -> Reply:
        import anthropic
        import tenacity

        sdk = self._client()
        start = self.clock()
        self.attempts = 0

        def left() -> float:
            return budget_s - (self.clock() - start)

        def wait(state: tenacity.RetryCallState) -> float:
            backoff = min(self.max_backoff_s, self.backoff_s * 2 ** (state.attempt_number - 1))
            backoff += self.backoff_s * _jitter()
            asked = retry_after_s(state.outcome.exception()) if state.outcome else None
            return max(backoff, asked) if asked is not None else backoff

        def stop(state: tenacity.RetryCallState) -> bool:
            # Stop when the next attempt could not even start (plus a second to run) in budget.
            return (self.clock() - start) + state.upcoming_sleep + 1.0 >= budget_s

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_is_transient), wait=wait, stop=stop, sleep=self.sleep, reraise=True
        )
        try:
            for attempt in retrying:
                with attempt:
                    self.attempts += 1
                    timeout = max(0.5, min(self.call_timeout_s, left()))
                    message = sdk.messages.create(model=self.model, timeout=timeout, **request)
        except anthropic.APIError as exc:
            what = describe_failure(exc, self.call_timeout_s)
            asked = retry_after_s(exc)
            if asked is not None and asked + 1.0 >= left():
                what += f", retry-after {asked:g} s is past the time left"
            raise LLMUnavailable(f"{what}; gave up after {self.attempts} attempt(s) in {self.clock() - start:.1f} s") from exc
        return Reply.model_validate(message.model_dump(mode="json"))


def _jitter() -> float:
    import random

    return random.random()


# --- the scripted stand-in ----------------------------------------------------------------

Scripted = Reply | LLMError | Callable[[dict[str, Any]], "Reply"]


@dataclass
class ScriptedClient:
    """A queue of canned answers, no HTTP: tests routing, repairs and revision rounds.

    Each item is a `Reply`, an `LLMError` to raise, or a function of the request returning a Reply.
    Every request is kept (deep-copied) in `requests` for the test to read.
    """

    replies: list[Scripted] = field(default_factory=list)
    model: str = "scripted"
    requests: list[dict[str, Any]] = field(default_factory=list)

    def create(self, request: dict[str, Any], *, budget_s: float) -> Reply:
        self.requests.append(copy.deepcopy(request))
        if not self.replies:
            raise AssertionError(f"scripted model: no answer left for request #{len(self.requests)}")
        item = self.replies.pop(0)
        if isinstance(item, LLMError):
            raise item
        return item(request) if callable(item) and not isinstance(item, Reply) else item


_ids = iter(range(1, 1 << 30))


def tool_reply(name: str, tool_input: Any, *, text: str | None = None, usage: TokenUsage | None = None) -> Reply:
    """A reply that calls one tool (what a forced tool_choice returns)."""
    content = [ContentBlock(type="text", text=text)] if text else []
    content.append(ContentBlock(type="tool_use", id=f"toolu_scripted_{next(_ids)}", name=name, input=tool_input))
    return Reply(id=f"msg_scripted_{next(_ids)}", content=content, stop_reason="tool_use", usage=usage or TokenUsage())


def text_reply(text: str, *, usage: TokenUsage | None = None) -> Reply:
    return Reply(
        id=f"msg_scripted_{next(_ids)}",
        content=[ContentBlock(type="text", text=text)],
        stop_reason="end_turn",
        usage=usage or TokenUsage(),
    )
