"""A check-in stores its snapshot without plots: they walk the whole history, and most check-ins
are never rendered. `rlagent report` draws them from the history rows stored beside the same
check-in's checkpoint (graph/historyrows.py); a watcher with `--report` keeps them in memory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from rlagent.agents.fleet_report import plots_of
from rlagent.graph.alerts import SNAPSHOT
from rlagent.graph.fleetview import read_snapshot, state_db_path
from rlagent.graph.runner import Monitor
from rlagent.tools.fleetdb import FleetDB
from rlagent.tools.layout import discover_run

from fleetkit import make_watcher, simulate


def _stored_snapshot(home, run_dir: str) -> dict:
    db = FleetDB.open(state_db_path(home, run_dir), create=False)
    try:
        return json.loads(db.get(SNAPSHOT))
    finally:
        db.close()


def test_the_report_draws_a_runs_plots_from_the_history_its_check_in_stored(tmp_path):
    run_dir = simulate("nan-h", tmp_path / "run", steps=40)
    home = tmp_path / "home"
    monitor = Monitor(discover_run(run_dir), home=home, offline=True)
    try:
        state = monitor.check_in()
        first = plots_of(state.memory.history)
        assert len(first) >= 6 and any(s.nonfinite_steps for p in first for s in p.series)  # the NaN steps too
        key = monitor.run.run_dir
        assert "plots" not in _stored_snapshot(home, key) and monitor.recorded.snapshot.plots == []
        assert read_snapshot(home, key)[0].plots == []  # `status` reads no plots
        assert read_snapshot(home, key, plots=True)[0].plots == first

        simulate("nan-h", tmp_path / "run", resume=True, steps=70)  # the run goes on: new rows, the same thread
        monitor.plots = True  # as a watcher with --report: the snapshot in memory carries them
        state = monitor.check_in()
        second = plots_of(state.memory.history)
        assert second != first and monitor.recorded.snapshot.plots == second
        assert "plots" not in _stored_snapshot(home, key)
        assert read_snapshot(home, key, plots=True)[0].plots == second
    finally:
        monitor.close()


def _plots_per_run(html: str) -> dict[str, int]:
    """Plots drawn in the report, by run index (an SVG's data-key is `run index:plot key`)."""
    counts: dict[str, int] = {}
    for index in re.findall(r'<svg class="plot" data-key="(\d+):', html):
        counts[index] = counts.get(index, 0) + 1
    return counts


def test_a_watcher_reports_the_plots_of_runs_it_did_not_check_in_that_round(tmp_path):
    """A finished run is retired: a new watcher does not check it again, and its report shows the
    plots read back from its store beside those of the run it checked."""
    root, home = tmp_path / "runs", tmp_path / "home"
    simulate("healthy-h", root / "going")
    simulate("finished-l", root / "done")
    report = tmp_path / "fleet.html"
    watcher = make_watcher([root], home, report=report)
    try:
        watcher.round()
        drawn = _plots_per_run(report.read_text())
    finally:
        watcher.close()
    assert len(drawn) == 2 and min(drawn.values()) >= 6

    again = make_watcher([root], home, report=report)
    try:
        checked = [o.run.name for o in again.round().outcomes]
        assert checked == ["going"]  # the finished one stays retired
        assert _plots_per_run(report.read_text()) == drawn
    finally:
        again.close()


def test_a_run_never_checked_is_read_once_for_the_report_with_its_plots(tmp_path):
    run_dir = simulate("healthy-h", tmp_path / "run")
    out = tmp_path / "report.html"
    env = {**os.environ, "RLAGENT_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-m", "rlagent", "report", str(run_dir), "-o", str(out), "--offline"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    assert "not checked by rlagent yet" in html and _plots_per_run(html)["0"] >= 6
