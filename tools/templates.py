"""The one jinja2 environment: every template of prompts/ (package data: the STATUS.md entry and
header, the follow-up entry, the approval request, the LLM prompts and their partials).

Templates are markdown or plain text, not HTML, so nothing is autoescaped; instead every value a
template prints loses its terminal control sequences (`finalize`), and untrusted text goes
through the filter of where it lands (tools.untrusted): `md_code` in a code span, `fence` in a
fenced block, `plain` on a terminal, `clip` on one bounded line, `untrusted` in a prompt's data
fence. Undefined values are errors (StrictUndefined).
"""

from __future__ import annotations

import contextlib
import hashlib
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import jinja2.bccache

from rlagent.models.actions import KNOBS
from rlagent.tools.untrusted import clip, data_fence, md_code, md_fence, strip_controls


def _printed(value: Any) -> Any:
    return strip_controls(value) if isinstance(value, str) else value


class _KeptCompiled(jinja2.FileSystemBytecodeCache):
    """Compiled templates kept between processes: every `rlagent check` compiled the STATUS.md
    entry's template anew (14 ms, against 0.4 ms to load it compiled). Only a cache: a file it
    cannot read or write (a full disk, a damaged or foreign file) costs that compile, nothing else."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:  # a damaged file: pickle and marshal raise what they raise
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def kept_compiled(directory: str | None = None) -> jinja2.BytecodeCache | None:
    """The cache of compiled templates, in `directory` or jinja2's own per-user one (a directory of
    the system's temp dir that only this user may use: it refuses one another user could write).
    Its files are named by this module's source too, as compiled code depends on the environment
    this module makes (and the template's source and jinja2's version, which jinja2 checks).
    None when there is no such directory."""
    try:
        key = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]  # OSError from a zipped install
        return _KeptCompiled(directory, f"__rlagent_{key}_%s.cache")
    except (OSError, RuntimeError):  # RuntimeError: jinja2 found no safe directory
        return None


@cache
def environment() -> jinja2.Environment:
    return make_environment(kept_compiled())


def make_environment(compiled: jinja2.BytecodeCache | None) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rlagent.prompts", "."),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        finalize=_printed,
        bytecode_cache=compiled,
    )
    env.filters.update(md_code=md_code, fence=md_fence, plain=strip_controls, clip=clip, untrusted=data_fence)
    env.globals.update(untrusted=data_fence, knobs=KNOBS)
    return env


def render(name: str, **values: Any) -> str:
    """Template `name` (a path under prompts/) rendered with `values`."""
    return environment().get_template(name).render(**values)
