"""The one jinja2 environment: every template of prompts/ (package data: the STATUS.md entry and
header, the follow-up entry, the approval request, the LLM prompts and their partials).

Templates are markdown or plain text, not HTML, so nothing is autoescaped; instead every value a
template prints loses its terminal control sequences (`finalize`), and untrusted text goes
through the filter of where it lands (tools.untrusted): `md_code` in a code span, `fence` in a
fenced block, `plain` on a terminal, `clip` on one bounded line, `untrusted` in a prompt's data
fence. Undefined values are errors (StrictUndefined).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2

from rlagent.models.actions import KNOBS
from rlagent.tools.untrusted import clip, data_fence, md_code, md_fence, strip_controls


def _printed(value: Any) -> Any:
    return strip_controls(value) if isinstance(value, str) else value


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rlagent.prompts", "."),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        finalize=_printed,
    )
    env.filters.update(md_code=md_code, fence=md_fence, plain=strip_controls, clip=clip, untrusted=data_fence)
    env.globals.update(untrusted=data_fence, knobs=KNOBS)
    return env


def render(name: str, **values: Any) -> str:
    """Template `name` (a path under prompts/) rendered with `values`."""
    return environment().get_template(name).render(**values)
