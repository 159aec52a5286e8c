"""A check-in's entry on the terminal: the runbook's fields with the health in colour, one line
per finding coloured by its severity, the other notes as written; each finding's evidence and the
review blocks only with `--full` (STATUS.md always has everything)."""

from __future__ import annotations

import re

from rich.markup import escape

from rlagent.commands.common import HEALTH_STYLE
from rlagent.commands.console import out

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
_FINDING = re.compile(r"^- \[(critical|warning|info)\] ")
_REVIEW_START = ("- Proposed", "- Command for ")
_GATE_LINES = ("Awaiting a person's approval", "Not offered for approval")


def entry_lines(entry: str, full: bool) -> list[str]:
    """The entry as rich markup lines (the text is escaped: it quotes logs and model output)."""
    lines: list[str] = []
    skipping = False
    for raw in entry.rstrip("\n").splitlines():
        line = raw.rstrip()
        if line.startswith("<!-- rlagent:checkin"):
            continue
        top = not line.startswith(" ")
        if top:
            skipping = False
        finding = _FINDING.match(line)
        if not full and top and line.startswith(_REVIEW_START):
            skipping = True  # the proposal's review rounds and the command block
            lines.append(f"[dim]{escape(line.split(':', 1)[0])}: … (review and command: --full)[/]")
            continue
        if skipping and line.lstrip().startswith(_GATE_LINES):
            lines.append(escape(line))  # what happens to the proposal is never hidden
            continue
        if skipping:
            continue
        if finding:
            style = SEVERITY_STYLE[finding.group(1)]
            lines.append(f"[{style}]{escape(line)}[/]")
            skipping = not full  # its evidence lines follow, indented
            continue
        if line.startswith("**Health**: "):
            health = line.removeprefix("**Health**: ")
            lines.append(f"[bold]Health[/]: [{HEALTH_STYLE.get(health, 'bold')}]{escape(health)}[/]")
            continue
        field = re.match(r"^\*\*(\w+)\*\*: ?(.*)$", line)
        if field:
            lines.append(f"[bold]{field.group(1)}[/]: {escape(field.group(2))}")
            continue
        lines.append(escape(line))
    return lines


def print_entry(entry: str, *, full: bool) -> None:
    for line in entry_lines(entry, full):
        out.print(line, markup=True)


def show_entry(entry: str, *, full: bool) -> None:
    """On a terminal, the coloured rendering; else (a pipe, a file) the entry's markdown as written."""
    if out.is_terminal:
        print_entry(entry, full=full)
    else:
        out.print(entry, markup=False)
