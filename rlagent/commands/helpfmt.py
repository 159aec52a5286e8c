"""How `--help` reads: a flag shows no `<bool>` type (it takes no value: `--offline`, never
`--offline true`), and `rlagent --version`."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import typer
from typer.core import TyperOption


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
