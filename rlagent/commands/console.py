"""rlagent's two consoles and its one error line.

Paths, log lines, tmux pane text and exception messages all reach a terminal through these, so
no string printed keeps a terminal control sequence (DESIGN.md rule 3: a run dir's file name or a
pane line could retitle the window or clear the screen). Rich markup stays on for rlagent's own
styling: a value put into a markup string goes through `escape`, or `[/]` in a path would end
the command with a MarkupError.
"""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from rlagent.tools.untrusted import one_line, strip_controls


class PlainConsole(Console):
    """A rich Console whose every string (a printed one, a table cell) is stripped of control
    sequences before markup is read."""

    def render_str(self, text: str, **kwargs) -> Text:
        return super().render_str(strip_controls(text), **kwargs)


out = PlainConsole(highlight=False, soft_wrap=True)
err = PlainConsole(stderr=True, highlight=False, soft_wrap=True)


def error_line(message: object) -> None:
    """`rlagent: error: <message>` on stderr, one line whatever the message holds."""
    err.print(f"[bold red]rlagent: error:[/] {escape(one_line(message))}", markup=True)


def fail(message: object) -> NoReturn:
    """A user error: one line on stderr, exit status 2."""
    error_line(message)
    raise typer.Exit(2)
