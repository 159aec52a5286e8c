"""`rlagent status ROOT`: every run under a folder as one table (run, framework, health, step / max,
rate, ETA, open incidents, last check-in), and the silences in force; `--json` for scripts. Read
from each run's state store alone (its saved summary): nothing is probed, nothing checked.

Also the incidents and silences lines of a single run's `rlagent status RUN_DIR`.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from rlagent.commands.console import out

STYLE = {"Healthy": "green", "Degraded": "yellow", "Down": "bold red"}


def is_fleet(path: Path) -> bool:
    """The path is not a run itself: a folder of several runs of any framework (as `check` and
    `watch` find them), or of nothing rlagent reads. One run's status is the run's."""
    from rlagent.commands.common import find_run
    from rlagent.tools.layout import RunNotFound

    try:
        return find_run(path).picked_from is not None  # an output dir, or a folder, of several runs
    except (RunNotFound, OSError):
        return path.is_dir()


def run_alerts(home: Path, run_dir: str) -> dict:
    """Open incidents and silences in force of one run, from its store."""
    from rlagent.graph.fleetview import state_db_path
    from rlagent.tools.fleetdb import FleetDB

    empty = {"incidents": [], "silences": [], "undelivered": 0}
    try:
        db = FleetDB.open(state_db_path(home, run_dir), create=False)
    except (OSError, sqlite3.Error):
        return empty
    if db is None:
        return empty
    try:
        now = datetime.now(UTC)
        return {
            "incidents": [i.model_dump(mode="json") for i in db.open_incidents().values()],
            "silences": [s.model_dump(mode="json") for s in db.silences(now)],
            "undelivered": len(db.undelivered()),
        }
    except (sqlite3.Error, ValueError):
        return empty
    finally:
        db.close()


def print_run_alerts(home: Path, run_dir: str) -> None:
    alerts = run_alerts(home, run_dir)
    for inc in alerts["incidents"]:
        acked = f", acknowledged by {inc['acked_by']}" if inc.get("acked_by") else ""
        out.print(
            f"open incident: {inc['finding_id']} ({inc['severity']}) since check-in #{inc['opened_checkin']}{acked}", markup=False
        )
    for s in alerts["silences"]:
        out.print(
            f"silence #{s['id']}: {s['finding_id']} until {s['until'][:16].replace('T', ' ')} UTC by {s['by']}: {s['reason']}",
            markup=False,
        )
    if alerts["undelivered"]:
        out.print(f"{alerts['undelivered']} notification(s) not delivered yet (retried by the next watch round)", markup=False)


def _age(when: datetime | None) -> str:
    if when is None:
        return "n/a"
    seconds = (datetime.now(UTC) - when).total_seconds()
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m ago"
    if seconds < 172800:
        return f"{seconds / 3600:.0f}h ago"
    return f"{seconds / 86400:.0f}d ago"


def fleet_rows(root: Path, home: Path, max_depth: int) -> tuple[list[dict], list[str]]:
    from rlagent.graph.fleetview import find_runs, read_snapshot

    runs, notes = find_runs([root], max_depth)
    rows = []
    for run in runs:
        snapshot, retired = read_snapshot(home, run.run_dir)
        alerts = run_alerts(home, run.run_dir)
        s = snapshot.summary if snapshot else None
        rows.append(
            {
                "run": run.name,
                "run_dir": run.run_dir,
                "framework": s.framework if s else run.framework.value,
                "health": s.health if s else None,
                "step": s.step if s else None,
                "max_steps": s.max_steps if s else None,
                "steps_per_hour": round(s.steps_per_hour, 2) if s and s.steps_per_hour else None,
                "eta_s": round(s.eta_s) if s and s.eta_s is not None else None,
                "finished": bool(s and s.finished),
                "retired": retired is not None,
                "behind": bool(s and s.behind),
                "checkin": s.checkin if s else 0,
                "checked_at": s.checked_at.isoformat() if s and s.checked_at else None,
                "checked_wall": s.checked_wall.isoformat() if s and s.checked_wall else None,
                "open_incidents": [i["finding_id"] for i in alerts["incidents"]],
                "incidents": alerts["incidents"],
                "silences": alerts["silences"],
                "undelivered_notifications": alerts["undelivered"],
            }
        )
    return rows, notes


def fleet_status(root: Path, as_json: bool, settings) -> None:
    from rlagent.agents.fleet_report import duration

    rows, notes = fleet_rows(root, settings.home, settings.watch.max_depth)
    if as_json:
        sys.stdout.write(json.dumps({"root": str(root.resolve()), "runs": rows, "notes": notes}, indent=2) + "\n")
        return
    if not out.is_terminal:
        out.width = max(out.width, 160)  # a pipe or a file: no terminal width to respect
    if not rows:
        out.print(f"no run found under {escape(str(root))}")
    else:
        table = Table(title=f"runs under {escape(str(root))}", title_justify="left", show_lines=False)
        for column, justify in (
            ("run", "left"),
            ("framework", "left"),
            ("health", "left"),
            ("step / max", "right"),
            ("rate", "right"),
            ("ETA", "right"),
            ("open incidents", "left"),
            ("last check-in", "left"),
        ):
            table.add_column(column, justify=justify, no_wrap=column != "open incidents", overflow="fold")  # type: ignore[arg-type]
        order = {"Down": 0, "Degraded": 1, "Healthy": 2}
        for row in sorted(rows, key=lambda r: (order.get(r["health"], 3), r["run"])):
            health = row["health"]
            shown = f"[{STYLE.get(health, 'bold')}]{health}[/]" if health else "[dim]not checked[/]"
            if row["retired"]:
                shown += " [dim](finished)[/]"
            elif row["behind"]:  # its step is where the reading got to, not yet where the run is
                shown += " [dim](catching up)[/]"
            step = (
                f"{row['step'] if row['step'] is not None else '–'} / {row['max_steps'] if row['max_steps'] is not None else '–'}"
            )
            rate = f"{row['steps_per_hour']:.1f}/h" if row["steps_per_hour"] else "–"
            eta = duration(row["eta_s"]) if row["eta_s"] is not None else ("done" if row["finished"] else "–")
            incidents = ", ".join(
                escape(i["finding_id"])
                + (" (silenced)" if any(s["finding_id"] in (i["finding_id"], "*") for s in row["silences"]) else "")
                for i in row["incidents"]
            )
            when = "never"
            if row["checkin"]:
                wall = datetime.fromisoformat(row["checked_wall"]) if row["checked_wall"] else None
                when = f"#{row['checkin']} {_age(wall)}"
            table.add_row(escape(row["run"]), escape(row["framework"]), shown, step, rate, eta, incidents or "–", when)
        out.print(table)
    for row in rows:
        for s in row["silences"]:
            out.print(
                f"silence #{s['id']} on {escape(row['run'])}: {escape(s['finding_id'])} until "
                f"{s['until'][:16].replace('T', ' ')} UTC by {escape(s['by'])}: {escape(s['reason'])}"
            )
        if row["undelivered_notifications"]:
            out.print(f"{escape(row['run'])}: {row['undelivered_notifications']} notification(s) waiting for delivery")
    for note in notes:
        out.print(f"note: {escape(note)}")
