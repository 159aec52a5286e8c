"""How `--help` reads: a flag shows no `<bool>` type (it takes no value: `--offline`, never
`--offline true`), and `rlagent --version`; and how a usage error is said: in one line."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version

import typer
from typer.core import TyperGroup, TyperOption

from rlagent.commands.console import error_line


def _display_type_rich(self: TyperOption, ctx):  # a flag takes no value: show no type
    if self.is_flag or self.count:
        return None
    return _plain_display_type(self, ctx)


_plain_display_type = TyperOption.display_type_rich
TyperOption.display_type_rich = _display_type_rich  # type: ignore[method-assign]


def package_version() -> str:
    try:
        return version("rlagent")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def show_version(value: bool) -> None:
    if value:
        typer.echo(f"rlagent {package_version()}")
        raise typer.Exit(0)


@contextlib.contextmanager
def _said_in_one_line() -> Iterator[None]:
    """A usage error (an unknown command or option, a missing argument, a bad value) as one
    `rlagent: error:` line saying where the help is, as every other failure is said, with its exit
    status (2 for a usage error), not typer's framed panel of five lines. The message can echo what was typed:
    no control sequence of it reaches the terminal."""
    try:
        yield
    except typer.TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # no arguments: typer shows the help
            raise
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        error_line(exc.format_message() + hint)
        sys.exit(exc.exit_code)


class OneLineUsageErrors(TyperGroup):
    """The top-level group: its own arguments are parsed in `make_context`, a command's in `invoke`."""

    def make_context(self, *args, **kwargs):
        with _said_in_one_line():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        with _said_in_one_line():
            return super().invoke(ctx)
