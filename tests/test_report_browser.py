"""The HTML report in a real headless Chromium (Debian's `chromium`, driven by playwright's Python
API through its executable path): it loads with no console error and no request beyond the file
itself, every plot has drawn every series, findings, incidents and marks are visible.

`RLAGENT_SCREENSHOT=docs/report.png pytest tests/test_report_browser.py` also saves the README's
screenshot.
"""

import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rlagent.graph.fleetview import state_db_path
from rlagent.models.incidents import Silence
from rlagent.tools.fleetdb import FleetDB

from fleetkit import make_watcher, simulate
from runbuilder import HRun

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    root, home = tmp / "runs", tmp / "home"
    simulate("crash-oom-h", root / "sweep", run_name="lr-3e-6-oom")
    simulate("nan-h", root / "sweep" / "lr-1e-5-nan")
    simulate("healthy-h", root / "sweep" / "lr-1e-6")
    simulate("truncation-l", root / "len-512")
    simulate("entropy-collapse-h", root / "temp-0.6")
    HRun(root, "just-started")  # configs, no step yet
    crashed = root / "sweep" / "lr-3e-6-oom"
    now = datetime.now(UTC)
    db = FleetDB.open(state_db_path(home, str(crashed.resolve())))
    db.add_silence(Silence(finding_id="cuda_oom", until=now + timedelta(hours=6), reason="known OOM", by="bob", created_at=now))
    db.close()
    watcher = make_watcher([root], home)
    try:
        watcher.round()
        simulate("crash-oom-h", root / "sweep", run_name="lr-3e-6-oom", resume=True, steps=45)  # restart into attempt_2
        watcher.round()
    finally:
        watcher.close()
    out = tmp / "fleet.html"
    env = {**os.environ, "RLAGENT_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-m", "rlagent", "report", str(root), "-o", str(out), "--offline"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def page(report):
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        events: dict[str, list] = {"console": [], "errors": [], "requests": []}
        page.on("console", lambda m: events["console"].append((m.type, m.text)))
        page.on("pageerror", lambda e: events["errors"].append(str(e)))
        page.on("request", lambda r: events["requests"].append(r.url))
        page.goto(report.as_uri(), wait_until="load")
        page.events = events
        yield page
        browser.close()


def test_the_page_loads_offline_with_no_console_error(page, report):
    assert page.events["errors"] == []
    assert [m for m in page.events["console"] if m[0] in ("error", "warning")] == []
    assert page.events["requests"] == [report.as_uri()]  # nothing fetched: self-contained
    assert page.title().startswith("rlagent: ")


def test_every_plot_has_drawn_its_series(page):
    plots = page.evaluate(
        """() => [...document.querySelectorAll('svg.plot')].map(svg => ({
            key: svg.dataset.key,
            width: svg.getBoundingClientRect().width,
            series: [...svg.querySelectorAll('path.series')].map(p => ({
                points: Number(p.dataset.points),
                vertices: p.getAttribute('d').split(/[ML]/).filter(Boolean).length,
                length: p.getTotalLength(),
                box: p.getBBox().width,
            })),
        }))"""
    )
    runs_with_steps = 5
    assert len(plots) >= runs_with_steps * 6
    for plot in plots:
        assert plot["width"] > 100 and plot["series"], plot
        for series in plot["series"]:
            assert series["vertices"] == series["points"] >= 2, plot["key"]
            assert series["length"] > 10 and series["box"] > 50, plot["key"]
    keys = {p["key"].split(":")[1] for p in plots}
    assert keys == {"reward", "entropy", "kl", "length", "truncation", "grad_norm", "step_time"}


def test_findings_incidents_and_restarts_are_visible(page):
    nan = page.locator("section.run[data-run='lr-1e-5-nan']")
    assert nan.locator("li.finding[data-finding='nan_detected']").is_visible()
    assert nan.locator("svg.plot line.mark.finding").count() > 0
    assert nan.locator("svg.plot line.nonfinite").count() > 0  # NaN steps ticked on the axis
    crashed = page.locator("section.run[data-run='lr-3e-6-oom']")
    assert crashed.locator("svg.plot line.mark.restart").count() == 7  # the resume, on every plot
    incidents = crashed.locator("table.incidents").text_content()  # folded away: none is open any more
    assert "run_crashed" in incidents and "cuda_oom" in incidents and "resolved 20" in incidents
    assert "silence #1: cuda_oom" in crashed.text_content()
    table = page.locator("table.fleet").inner_text()
    for name in ("lr-3e-6-oom", "lr-1e-5-nan", "lr-1e-6", "len-512", "temp-0.6", "just-started"):
        assert name in table
    fresh = page.locator("section.run[data-run='just-started']")
    assert "no step yet: nothing to plot" in fresh.inner_text() and fresh.locator("svg.plot").count() == 0
    assert page.locator("details pre").first.inner_text().startswith("## ")


def test_screenshot(page, tmp_path):
    shot = tmp_path / "report.png"
    page.set_viewport_size({"width": 1280, "height": 1500})
    page.screenshot(path=str(shot), full_page=False)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a blank page compresses far smaller
    target = os.environ.get("RLAGENT_SCREENSHOT")
    if target:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, target)
