"""The LLM prompts: jinja2 package data (prompts/llm_*.j2) with StrictUndefined, and the request
layout that makes caching work.

Every request has the same prefix: all tools, then the static system prompt (the finding
catalogue, GRPO/PPO heuristics, the runbook's rules) marked `cache_control: ephemeral`. The
prefix holds no clock and no run data, so it is byte-identical across roles and check-ins and is
served from the cache after the first call. Everything that changes (the role's task, `now`, the
run's data) is in the user turn. Untrusted text is fenced by `untrusted()`.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import jinja2

from rlagent.agents.llm.models import tools
from rlagent.models.actions import KNOBS
from rlagent.tools.llm.client import CacheTTL

FENCE_OPEN = "<untrusted"
FENCE_CLOSE = "</untrusted>"


def neutralise(text: object, limit: int | None = None) -> str:
    """Untrusted text made safe to place inside an <untrusted> fence: it cannot close or open a
    fence (angle brackets of our tag are swapped for look-alikes), control characters are gone,
    and it is bounded."""
    flat = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "", str(text))
    flat = re.sub(r"<(/?)untrusted", r"‹\1untrusted", flat, flags=re.IGNORECASE)
    if limit is not None and len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return flat


def attr(text: object) -> str:
    """A value for the fence's source attribute: one line, no quotes or brackets."""
    return re.sub(r"[\"<>\n\r]", "'", str(text))[:160]


def untrusted(text: object, source: str, limit: int | None = None) -> str:
    """One fenced block of untrusted data, labelled with where it came from."""
    return f'{FENCE_OPEN} source="{attr(source)}">\n{neutralise(text, limit)}\n{FENCE_CLOSE}'


def clip(text: object, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@cache
def prompt_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rlagent.prompts", "."),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
    )
    env.filters["untrusted"] = untrusted
    env.filters["clip"] = clip
    env.globals["untrusted"] = untrusted
    env.globals["knobs"] = KNOBS
    return env


def render(name: str, **values: Any) -> str:
    return prompt_env().get_template(name).render(**values).strip() + "\n"


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
