"""`rlagent report RUN_DIR|ROOT -o FILE.html`: the self-contained HTML report of one run or of every
run under a root, from what their check-ins recorded. A run rlagent never checked is read once into
a throwaway state (its STATUS.md and its own state are left untouched)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from rlagent.commands.console import out


def build(roots: list[Path], settings, *, entries: int, output: Path) -> tuple[int, float, list[str]]:
    """Write the report; (runs, seconds, notes)."""
    from rlagent.graph.fleetview import find_runs, read_snapshot, write_report

    started = time.perf_counter()
    runs, notes = find_runs(roots, settings.watch.max_depth)
    snapshots = []
    scratch: tempfile.TemporaryDirectory | None = None
    try:
        for run in runs:
            snapshot, _ = read_snapshot(settings.home, run.run_dir, plots=True)
            if snapshot is None:
                scratch = scratch or tempfile.TemporaryDirectory(prefix="rlagent-report-")
                from rlagent.graph.runner import Monitor  # LangGraph: only for a run never checked

                try:
                    monitor = Monitor(run, home=Path(scratch.name), offline=settings.offline, write=False, plots=True)
                    try:
                        monitor.check_in()
                        assert monitor.recorded is not None
                        snapshot = monitor.recorded.snapshot
                    finally:
                        monitor.close()
                except Exception as exc:  # one unreadable run never costs the others their report
                    notes.append(f"{run.name}: could not be read ({type(exc).__name__}: {exc})"[:300])
                    continue
                snapshot.notes.insert(0, "not checked by rlagent yet: read once for this report (nothing written)")
            snapshots.append(snapshot)
    finally:
        if scratch is not None:
            scratch.cleanup()
    if not runs:
        notes.append("no run found under " + ", ".join(str(r) for r in roots))
    single = len(runs) == 1 and len(roots) == 1
    title = "rlagent: " + (runs[0].name if single else ", ".join(r.resolve().name or str(r) for r in roots))
    subtitle = runs[0].run_dir if single else ", ".join(str(r.resolve()) for r in roots)
    write_report(output, snapshots, title=title, entries=entries, notes=notes, subtitle=subtitle)
    return len(snapshots), time.perf_counter() - started, notes


def report(
    roots: Annotated[list[Path], typer.Argument(help="A run directory, or folders holding runs.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write.")] = Path("report.html"),
    entries: Annotated[
        int | None, typer.Option("--entries", min=0, help="STATUS.md entries per run (default: 20 for one run, 3 for a fleet).")
    ] = None,
    offline: Annotated[bool, typer.Option("--offline", help="Recorded runs: no live probes for a run never checked.")] = False,
    config: Annotated[Path | None, typer.Option("--config", help="TOML settings file.")] = None,
    home: Annotated[Path | None, typer.Option("--home", help="Where run state is kept (env RLAGENT_HOME).")] = None,
) -> None:
    """Write a self-contained HTML report (plots, findings, incidents, STATUS.md entries); no network needed to view it."""
    from rlagent.commands import common
    from rlagent.tools.safefs import not_a_directory

    settings = common.settings_from(config, home=home, offline=offline or None)
    for root in roots:
        if problem := not_a_directory(root):
            common.fail(f"{root}: {problem}")
    if entries is None:
        entries = 20 if len(roots) == 1 and _is_run(roots[0]) else 3
    try:
        count, took, notes = build(roots, settings, entries=entries, output=output)
    except OSError as exc:
        common.fail(f"{output}: cannot write it ({exc.strerror or exc})")
        return
    for note in notes:
        out.print(f"note: {escape(note)}")
    size = output.stat().st_size / 1024
    out.print(f"wrote {escape(str(output))} ({count} run(s), {size:.0f} KB) in {took:.2f}s")


def _is_run(path: Path) -> bool:
    from rlagent.tools.layout import RunNotFound, discover_run

    try:
        return discover_run(path).picked_from is None
    except RunNotFound:
        return False
