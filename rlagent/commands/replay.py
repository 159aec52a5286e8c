"""`rlagent replay FIXTURE`: run the real check-in graph over a fixture's simulated run, check-in by check-in.

Shows what the monitor said at each scheduled moment (time, step, health, findings), marked
against the fixture's expectations; `--status` adds the STATUS.md it wrote.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from rlagent.commands.console import error_line, out

STYLE = {"Healthy": "bold green", "Degraded": "bold yellow", "Down": "bold red"}


def replay(
    fixture: Annotated[str, typer.Argument(help="A fixture folder, or its name under evals/fixtures (13_entropy-collapse-h).")],
    status: Annotated[bool, typer.Option("--status", help="Also print the STATUS.md the replay wrote.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print every check-in's result as JSON, nothing else.")] = False,
    keep: Annotated[
        Path | None, typer.Option("--keep", help="Keep the grown working copy and state home in this (new) directory.")
    ] = None,
    fixtures: Annotated[
        Path | None,
        typer.Option(
            "--fixtures",
            help="The fixture set (default: $RLAGENT_FIXTURES, else evals/fixtures of the rlagent checkout you are in).",
        ),
    ] = None,
) -> None:
    """Replay a simulated-run fixture through the check-in graph at its scheduled check-ins."""
    from rlagent.commands.progress import working
    from rlagent.evals.fixture import FixtureError, load_fixture, resolve
    from rlagent.evals.locate import FixturesNotFound, find_fixtures
    from rlagent.evals.replay import replay as run_replay
    from rlagent.evals.scoring import explain, score_fixture

    try:
        path = Path(fixture) if Path(fixture).is_dir() else resolve(fixture, find_fixtures(fixtures))
        loaded = load_fixture(path)
        if keep is not None and keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
            raise FixtureError(fixture, [f"--keep {keep}: " + ("not empty" if keep.is_dir() else "not a directory")])
        with working(f"replaying {loaded.name}", enabled=not as_json):
            result = run_replay(loaded, workdir=keep)
    except (FixtureError, FixturesNotFound) as exc:
        error_line(exc)
        raise typer.Exit(2) from None
    if as_json:
        sys.stdout.write(json.dumps(result.model_dump(mode="json"), indent=2) + "\n")
        return
    case = result.case
    score = score_fixture(result)
    out.print(f"[bold]{escape(result.fixture)}[/]: {escape(case.title)} ({escape(', '.join(_about(case)))})")
    for c in result.checkins:
        accepted = [h.value for h in case.health_at(c.index)]
        health = c.health or "n/a"
        mark = "" if health in accepted else f" [red](expected {' or '.join(accepted)})[/]"
        total = c.max_steps if c.max_steps is not None else "?"
        out.print(
            f"#{c.index:<3} {c.at:%Y-%m-%d %H:%M:%S} UTC  step {c.step if c.step is not None else '-'}/{total}  "
            f"[{STYLE.get(health, 'bold')}]{health}[/]{mark}" + ("" if c.findings else "  no findings")
        )
        for f in c.findings:
            out.print(f"       {f.id} ({f.severity}): {f.summary}", markup=False)
    problems = explain(result, score)
    out.print()
    if problems:
        out.print(f"[bold red]differs from case.toml[/] ({result.seconds:.2f}s):")
        for line in problems:
            out.print(line, markup=False)
    else:
        out.print(f"[bold green]as expected[/] ({len(result.checkins)} check-ins, {result.seconds:.2f}s)")
    if status:
        out.print()
        out.print(result.status_md or "(no STATUS.md was written)", markup=False)


def _about(case) -> list[str]:
    """What the header adds to the case's title: framework and layout unless the title says them, the tier."""
    title = case.title.lower()
    parts = [] if case.framework == "prime-rl" or case.framework in title else [case.framework]
    if case.layout is not None and f"layout {case.layout.value}".lower() not in title:
        parts.append(f"layout {case.layout.value}")
    return [*parts, case.difficulty.value]
