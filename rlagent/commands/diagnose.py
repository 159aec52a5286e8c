"""`rlagent diagnose PATH|-`: judge a pasted excerpt, a log file, a metrics export or stdin, of any
framework (findings.md, excerpts); the text says the health, the findings with their evidence and what
could not be judged; `--json` prints DESIGN.md's report with `framework` and `source_kind`."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from rlagent.commands.common import LlmOpt, fail
from rlagent.commands.console import err, out


def diagnose(
    path: Annotated[
        str,
        typer.Argument(
            help="A log, an excerpt, a metrics export (.csv, .jsonl, trainer_state.json, "
            "tfevents, .wandb), a .gz of one, or - for stdin."
        ),
    ],
    framework: Annotated[
        str | None, typer.Option("--framework", help="prime-rl, verl, trl or openrlhf (default: detected).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout, nothing else.")] = False,
    llm: LlmOpt = None,
) -> None:
    """Judge one log, excerpt or metrics export of any framework."""
    from rlagent.agents.excerpt import DiagnoseError
    from rlagent.agents.excerpt import diagnose as judge

    if framework is not None and framework not in ("prime-rl", "verl", "trl", "openrlhf"):
        fail(f"--framework must be prime-rl, verl, trl or openrlhf, not {framework!r}")
    if path == "-" and sys.stdin.isatty():  # typed, not piped: say what it waits for
        err.print("rlagent: reading the log from this terminal: paste it, then Ctrl-D on an empty line", markup=False)
    try:
        result = judge(path, framework)  # "-": stdin, read as it streams
    except DiagnoseError as exc:
        fail(str(exc))
    report = result.report()
    if llm is not None and llm.value != "off":
        report["notes"].append("--llm: Claude's narrative is only added to check-ins of a run directory; the rules decided here")
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return
    fw = result.framework or "no known framework"
    out.print(
        f"{result.name}: {result.health.value} ({fw}, {result.source_kind}"
        + (f", {result.steps_seen} steps, last {result.step}" if result.steps_seen else ", no steps")
        + ")",
        markup=False,
    )
    for f in result.findings:
        out.print(f"  {f.severity.value:<8} {f.id}: {f.summary}", markup=False)
        for line in f.evidence[:4]:
            out.print(f"             {line[:200]}", markup=False)
    if not result.findings:
        out.print("  no findings", markup=False)
    for note in result.notes:
        out.print(f"  note: {note}", markup=False)
    for line in result.cannot_judge:
        out.print(f"  cannot judge: {line}", markup=False)
