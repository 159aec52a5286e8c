"""A folder of several verl, TRL or OpenRLHF runs, as `check`, `status` and `watch` are pointed at it:
the same runs for all three, never one run merged from their logs; and a symlink loop beside the
runs hides none of them. Copies of simulated fixture runs, real processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rlagent.graph.fleetview import find_runs

FIXTURES = Path(__file__).resolve().parents[1] / "evals" / "fixtures"
RLAGENT = [sys.executable, "-m", "rlagent"]


def rlagent(*args: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*RLAGENT, *args, "--home", str(home)], capture_output=True, text=True, timeout=120)


def folder_of_runs(tmp_path: Path) -> Path:
    folder = tmp_path / "sweep"
    shutil.copytree(FIXTURES / "84_verl-healthy" / "run", folder / "lr-1e-6")
    shutil.copytree(FIXTURES / "87_verl-entropy-collapse" / "run", folder / "lr-1e-5")
    shutil.copytree(FIXTURES / "100_trl-healthy" / "run", folder / "trl-baseline")
    for age, name in enumerate(("lr-1e-5", "trl-baseline", "lr-1e-6")):  # lr-1e-5 written last
        for file in (folder / name).rglob("*"):
            os.utime(file, (1_800_000_000 - age * 3600,) * 2)
    return folder


def test_check_of_a_folder_of_runs_checks_the_newest_and_says_so(tmp_path):
    """It used to read the three runs' logs as one verl run and write STATUS.md into the folder."""
    folder = folder_of_runs(tmp_path)
    done = rlagent("check", str(folder), "--offline", "--llm", "off", "--json", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["run_dir"] == str(folder / "lr-1e-5") and report["picked_from"] == str(folder)
    assert report["health"] == "Degraded" and "entropy_collapse" in {f["id"] for f in report["findings"]}
    assert report["step"] == 45
    assert not (folder / "STATUS.md").exists() and (folder / "lr-1e-5" / "STATUS.md").exists()


def test_status_and_watch_see_the_folder_as_its_runs(tmp_path):
    folder = folder_of_runs(tmp_path)
    home = tmp_path / "home"
    watched = rlagent("watch", str(folder), "--offline", "--max-rounds", "1", home=home)
    assert watched.returncode == 0, watched.stderr
    status = rlagent("status", str(folder), "--json", home=home)
    assert status.returncode == 0, status.stderr
    rows = {Path(row["run_dir"]).name: row for row in json.loads(status.stdout)["runs"]}
    assert set(rows) == {"lr-1e-6", "lr-1e-5", "trl-baseline"}
    assert {name: row["framework"] for name, row in rows.items()} == {"lr-1e-6": "verl", "lr-1e-5": "verl", "trl-baseline": "trl"}
    assert rows["lr-1e-5"]["health"] == "Degraded" and rows["lr-1e-6"]["health"] == "Healthy"


def test_a_symlink_loop_beside_the_runs_hides_none_of_them(tmp_path):
    """One entry whose is_dir() raised (ELOOP) made the whole folder unlistable: no run found."""
    folder = folder_of_runs(tmp_path)
    (folder / "loop-a").symlink_to(folder / "loop-b")
    (folder / "loop-b").symlink_to(folder / "loop-a")
    (folder / "dangling").symlink_to(tmp_path / "gone")
    runs, notes = find_runs([folder])
    assert sorted(Path(run.run_dir).name for run in runs) == ["lr-1e-5", "lr-1e-6", "trl-baseline"]
    assert notes == []
