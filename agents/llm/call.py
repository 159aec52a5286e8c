"""One structured question to Claude: optional read-only tool rounds, then a forced answer tool,
validated into its pydantic model, with exactly one repair attempt.

- Tool rounds use `tool_choice: any` (a tool must be called); the last round forces the answer
  tool. Rounds and reads per round are bounded, so a check-in's cost is bounded.
- Before every call the conversation is fitted to the per-call input budget: the oldest tool
  results are elided first. A request that still does not fit is not sent.
- An answer that does not validate (or plain text instead of the tool) gets one repair turn that
  quotes the validation errors and forces the tool again; a second failure raises
  `LLMInvalidAnswer`, and the caller goes on with the rules.
The words of these turns are in prompts/partials/llm_messages.j2.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from rlagent.agents.llm.evidence import Readers
from rlagent.agents.llm.models import READERS
from rlagent.agents.llm.prompts import base_request, message
from rlagent.tools.llm.budget import Session
from rlagent.tools.llm.client import LLMBudgetExceeded, LLMInvalidAnswer, LLMSettings, Reply, estimate_tokens

T = TypeVar("T", bound=BaseModel)
MAX_READS_PER_ROUND = 3


@dataclass
class Answer(Generic[T]):
    value: T
    rounds: int = 0
    """Tool rounds taken before the answer."""
    repaired: bool = False
    reads: list[str] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    """Estimated input tokens of each request sent."""


def ask(
    session: Session,
    settings: LLMSettings,
    *,
    role: str,
    prompt: str,
    tool: str,
    model: type[T],
    readers: Readers | None = None,
    max_rounds: int = 0,
) -> Answer[T]:
    """Ask `prompt` and return the validated answer of `tool` (see the module docstring)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    rounds, repaired = 0, False
    sent: list[int] = []
    while True:
        final = readers is None or rounds >= max_rounds
        choice = {"type": "tool", "name": tool} if final or repaired else {"type": "any"}
        request = {**base_request(settings.cache_ttl, settings.max_output_tokens), "tool_choice": choice}
        request["messages"] = fit(request, messages, settings.max_input_tokens)
        sent.append(estimate_tokens(request))
        reply = session.call(role, request)
        uses = reply.tool_uses()
        answer = next((u for u in uses if u.name == tool), None)
        if answer is not None:
            try:
                return Answer(model.model_validate(answer.input), rounds, repaired, readers.calls if readers else [], sent)
            except ValidationError as exc:
                if repaired:
                    raise LLMInvalidAnswer(f"{tool} answer invalid after one repair ({_first_error(exc)})") from exc
                messages += _repair(reply, message("invalid_answer", tool=tool, errors=_errors(exc)))
                repaired = True
                continue
        reads = [u for u in uses if u.name in READERS]
        if reads and not final and not repaired:
            messages += _read_round(reply, readers, tool)
            rounds += 1
            continue
        if repaired:
            raise LLMInvalidAnswer(f"answered without calling {tool}, even when asked again")
        messages += _repair(reply, message("answer_now", tool=tool))
        repaired = True


def _read_round(reply: Reply, readers: Readers | None, tool: str) -> list[dict[str, Any]]:
    """The assistant turn and the tool results (every tool_use must get its result)."""
    results = []
    done = 0
    for use in reply.tool_uses():
        if use.name in READERS and readers is not None and done < MAX_READS_PER_ROUND:
            try:
                args = READERS[use.name].model_validate(use.input)
            except ValidationError as exc:
                results.append(_result(use.id, message("invalid_read", errors=_errors(exc)), error=True))
                continue
            results.append(_result(use.id, readers.run(use.name, args)))
            done += 1
        else:
            limit = None if use.name not in READERS else MAX_READS_PER_ROUND
            results.append(_result(use.id, message("read_refused", name=use.name, tool=tool, max_reads=limit), error=True))
    return [{"role": "assistant", "content": [b.wire() for b in reply.content]}, {"role": "user", "content": results}]


def _repair(reply: Reply, instruction: str) -> list[dict[str, Any]]:
    content = [b.wire() for b in reply.content if b.type in ("text", "tool_use")]
    if not content:
        content = [{"type": "text", "text": message("no_answer")}]
    uses = [b for b in reply.content if b.type == "tool_use"]
    user: list[dict[str, Any]] = [_result(u.id, instruction, error=True) for u in uses]
    if not uses:
        user.append({"type": "text", "text": instruction})
    return [{"role": "assistant", "content": content}, {"role": "user", "content": user}]


def _result(tool_use_id: str | None, text: str, *, error: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": text}
    if error:
        out["is_error"] = True
    return out


def fit(request: dict[str, Any], messages: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The messages with the oldest tool results elided until the request fits `budget` tokens;
    raises LLMBudgetExceeded if even that is not enough."""
    fitted = copy.deepcopy(messages)
    results = [b for m in fitted if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]
    marker = elided()
    while estimate_tokens({**request, "messages": fitted}) > budget:
        longest = next((b for b in results if b["content"] != marker and len(str(b["content"])) > len(marker)), None)
        if longest is None:
            raise LLMBudgetExceeded(f"the request does not fit the per-call input budget ({budget:,} tokens)")
        longest["content"] = marker
    return fitted


@cache
def elided() -> str:
    """What an elided tool result reads."""
    return message("elided")


def _errors(exc: ValidationError, limit: int = 6) -> str:
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()[:limit]]
    return "; ".join(parts)


def _first_error(exc: ValidationError) -> str:
    return _errors(exc, 1)
