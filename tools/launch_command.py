"""The exact restart command: the run's own launch command plus a typed action, shell-quoted.

Pure functions, no I/O. The result depends only on the launch argv (found, never guessed), the
layout, the run's name and dir, the resume step and the typed overrides, so anyone (a reviewer,
the launcher at send time, a test) can rebuild it and compare word for word.

Resume flags per layout (prime-rl-formats.md section 9):
- H: `--run.name <name> --resume.step N`. `--run.name` is never left out: without it prime-rl
  makes a new run dir, finds no checkpoint and silently trains from step 1.
- L: `--output-dir <dir> --ckpt.resume-step N` (the run is identified by its output dir alone).
Nothing else is added: `--max-steps` stays what the launch command (or its config file) said,
the run's total, and the run's own flags and `@ config` files stay as they were. Flags that would
wipe the run (`--clean`, `--clean-output-dir`) and earlier resume flags are dropped.
"""

from __future__ import annotations

import re
import shlex

from rlagent.models.actions import KNOBS, Override

# Tokens a shell would treat as operators: a launch command is one simple command.
SHELL_OPERATORS = frozenset({";", "&&", "||", "|", "&", ">", ">>", "<", "<<", "|&", "(", ")", ";;", "&>", ">&", "<&"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

_DROP_BARE = {"H": {"--resume", "--clean", "--clean-output-dir"}, "L": {"--clean-output-dir", "--clean"}}
_DROP_WITH_VALUE = {"H": {"--resume.step", "--resume.dir"}, "L": {"--ckpt.resume-step"}}


class CommandError(ValueError):
    """No safe command can be built; the message is one clear line for the entry and the user."""


def normalize_flag(flag: str) -> str:
    """prime-rl's CLI takes `_` and `-` alike in flag names (it rewrites `_` to `-`)."""
    return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag


def _split(token: str) -> tuple[str, str | None]:
    if token.startswith("--") and "=" in token:
        flag, value = token.split("=", 1)
        return normalize_flag(flag), value
    return normalize_flag(token), None


def check_argv(argv: list[str]) -> None:
    """A launch command must be one simple command of printable words."""
    if not argv:
        raise CommandError("the launch command is empty")
    for token in argv:
        if _CONTROL.search(token):
            raise CommandError(f"the launch command holds a control character (in {token!r})")
        if token in SHELL_OPERATORS:
            raise CommandError(f"the launch command must be one command without shell operators; found {token!r}")


def flag_value(argv: list[str], flag: str) -> str | None:
    """Value of the last occurrence of `flag` (`--flag v` or `--flag=v`)."""
    wanted = normalize_flag(flag)
    value = None
    for index, token in enumerate(argv):
        name, inline = _split(token)
        if name != wanted:
            continue
        if inline is not None:
            value = inline
        elif index + 1 < len(argv):
            value = argv[index + 1]
    return value


def strip_flags(argv: list[str], *, bare: set[str], with_value: set[str]) -> list[str]:
    out: list[str] = []
    index = 0
    while index < len(argv):
        name, inline = _split(argv[index])
        if name in bare:
            index += 1
        elif name in with_value:
            index += 1 if inline is not None else 2
        else:
            out.append(argv[index])
            index += 1
    return out


def build_argv(
    launch_argv: list[str],
    *,
    layout: str,
    run_dir: str,
    run_name: str,
    resume_step: int,
    overrides: list[Override] = (),  # type: ignore[assignment]
    max_steps: int | None = None,
) -> list[str]:
    """The restart argv: launch argv minus resume/clean/overridden flags, plus the run's identity
    when missing, the resume step and the overrides, in that order. `max_steps` (the run's total)
    only guards against resuming a finished run."""
    check_argv(launch_argv)
    if resume_step < 1:
        raise CommandError(f"resume step must be >= 1, got {resume_step}")
    if max_steps is not None and resume_step >= max_steps:
        raise CommandError(f"checkpoint step {resume_step} is not before max_steps {max_steps}: the run is done")
    knob_flags = {normalize_flag(KNOBS[o.knob].flag(layout)) for o in overrides}
    argv = strip_flags(launch_argv, bare=_DROP_BARE[layout], with_value=_DROP_WITH_VALUE[layout] | knob_flags)
    if layout == "H":
        named = flag_value(argv, "--run.name")
        if named is None:
            argv += ["--run.name", run_name]
        elif named != run_name and flag_value(argv, "--run.dir") is None:
            raise CommandError(f"the launch command names run {named!r} but the run dir is {run_name!r}")
    elif flag_value(argv, "--output-dir") is None:
        argv += ["--output-dir", run_dir]
    argv += ["--resume.step", str(resume_step)] if layout == "H" else ["--ckpt.resume-step", str(resume_step)]
    for override in overrides:
        argv += [KNOBS[override.knob].flag(layout), override.text()]
    return argv


def command_line(argv: list[str]) -> str:
    """One line a POSIX shell reads back as exactly `argv`."""
    return shlex.join(argv)


def split_words(text: str) -> list[str]:
    """Shell words, with operators (`;`, `&&`, `|`, `>`...) split out as their own tokens so that
    `check_argv` sees them even when written without spaces (`a.toml;rm`)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def parse_launch_command(text: str) -> list[str]:
    """A launch command written by a person (flag or config): shell words, one simple command."""
    try:
        argv = split_words(text)
    except ValueError as exc:
        raise CommandError(f"launch command {text!r} does not parse as shell words ({exc})") from exc
    check_argv(argv)
    return argv
