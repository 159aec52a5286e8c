"""The LLM prompts: jinja2 package data (prompts/llm_*.j2, rendered by tools.templates), and the
request layout that makes caching work.

Every request has the same prefix: all tools, then the static system prompt (the finding
catalogue, GRPO/PPO heuristics, the runbook's rules) marked `cache_control: ephemeral`. The
prefix holds no clock and no run data, so it is byte-identical across roles and check-ins and is
served from the cache after the first call. Everything that changes (the role's task, `now`, the
run's data) is in the user turn. Untrusted text is fenced by `untrusted()` (tools.untrusted's
`data_fence`).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from rlagent.agents.llm.models import tools
from rlagent.tools import templates
from rlagent.tools.llm.client import CacheTTL


def render(name: str, **values: Any) -> str:
    """An LLM template rendered by the one jinja2 environment (tools.templates), stripped, one
    trailing newline."""
    return templates.render(name, **values).strip() + "\n"


def message(macro: str, /, **values: Any) -> str:
    """One short turn of the conversation: a macro of prompts/partials/llm_messages.j2 (the repair
    turn, a refused tool call, the marker of cut text)."""
    macros = templates.environment().get_template("partials/llm_messages.j2").module
    return str(getattr(macros, macro)(**values))


@cache
def system_text() -> str:
    return render("llm_system.j2")


def system_blocks(ttl: CacheTTL) -> list[dict[str, Any]]:
    control: dict[str, str] = {"type": "ephemeral"}
    if ttl != "5m":
        control["ttl"] = ttl
    return [{"type": "text", "text": system_text(), "cache_control": control}]


def base_request(ttl: CacheTTL, max_tokens: int) -> dict[str, Any]:
    """The cached prefix (tools, then system) and the output bound; add messages and tool_choice."""
    return {"max_tokens": max_tokens, "tools": tools(), "system": system_blocks(ttl)}
