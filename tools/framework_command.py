"""Resume commands for verl, TRL and OpenRLHF runs: the run's own launch command (its launch script,
or a command a person gave) with the framework's resume flags from the adapter's `ResumePlan`.

Only flags this module writes are added, and only the flags the plan names are removed; no text read
from a log or a rollout ever reaches the command.
"""

from __future__ import annotations

from rlagent.tools.adapters.base import ResumePlan
from rlagent.tools.launch_command import CommandError, check_argv


def _drop(argv: list[str], names: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        key = word.split("=", 1)[0]
        if key in names:
            skip = "=" not in word and word.startswith("--")
            continue
        out.append(word)
    return out


def resume_argv(launch_argv: list[str], plan: ResumePlan) -> list[str]:
    """`launch_argv` without the plan's `drop` flags, then the plan's `add` flags."""
    if not plan.possible:
        raise CommandError(plan.why or "the run cannot be resumed")
    check_argv(launch_argv)
    argv = _drop(list(launch_argv), plan.drop) + list(plan.add)
    check_argv(argv)
    return argv
