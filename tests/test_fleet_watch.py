"""The fleet watcher over real simulated runs on disk: discovery, retirement, broken and slow runs,
adaptive cadence (graph/fleet.py, built as `rlagent watch` builds it)."""

import shutil
import subprocess
import sys
import threading
import time

from rlagent.graph.fleetview import find_runs
from rlagent.graph.runner import Monitor
from rlagent.graph.store import run_key

from conftest import loguru_line
from fleetkit import make_watcher, simulate


def test_new_runs_are_picked_up_deleted_ones_dropped_and_finished_ones_retired(tmp_path):
    root, home = tmp_path / "runs", tmp_path / "home"
    first = simulate("healthy-h", root / "sweep" / "lr-1e-6")
    done = simulate("finished-h", root / "sweep" / "lr-3e-6")
    watcher = make_watcher([root], home)
    try:
        one = watcher.round()
        assert sorted(o.run.name for o in one.outcomes) == ["lr-1e-6", "lr-3e-6"]
        finished = next(o for o in one.outcomes if o.run.name == "lr-3e-6")
        assert finished.retired and "final check-in: the run finished" in (done / "STATUS.md").read_text()

        late = simulate("truncation-l", root / "late-run")
        two = watcher.round()
        assert two.new == ["late-run"]
        assert sorted(o.run.name for o in two.outcomes) == ["late-run", "lr-1e-6"]  # the finished run is not checked again
        assert (done / "STATUS.md").read_text().count("<!-- rlagent:checkin") == 2  # header + its final entry

        shutil.rmtree(first)
        three = watcher.round()
        assert three.gone == ["lr-1e-6"] and any("lr-1e-6: run directory gone" in n for n in three.notes)
        assert [o.run.name for o in three.outcomes] == ["late-run"] and str(first) not in watcher.slots
        assert late.exists()
    finally:
        watcher.close()

    # a new watcher (a restarted `rlagent watch`) keeps the finished run retired ...
    again = make_watcher([root], home)
    try:
        rep = again.round()
        assert "lr-3e-6 (finished earlier: retired)" in rep.new and "lr-3e-6" not in [o.run.name for o in rep.outcomes]
        # ... until it shows new activity (its trainer writes again): then it is watched again
        time.sleep(0.05)
        with open(done / "logs" / "latest" / "trainer.log", "a") as log:
            log.write(loguru_line("15:00:00", "INFO", "Starting RL trainer (model=Qwen/Qwen3-0.6B, world_size=1)", "[trainer0]:"))
        rep = again.round()
        assert any("lr-3e-6: new activity after it finished" in n for n in rep.notes)
        assert "lr-3e-6" in [o.run.name for o in rep.outcomes]
    finally:
        again.close()


def test_a_run_whose_check_in_raises_does_not_stop_the_others(tmp_path):
    root, home = tmp_path / "runs", tmp_path / "home"
    simulate("healthy-h", root / "good")
    broken = simulate("healthy-l", root / "broken")
    # its state store is unusable (a directory where the SQLite file should be): the check-in raises
    (home / "runs" / run_key(str(broken.resolve())) / "state.db").mkdir(parents=True)
    watcher = make_watcher([root], home)
    try:
        for _ in range(2):
            rep = watcher.round()
            by_name = {o.run.name: o for o in rep.outcomes}
            assert by_name["good"].summary is not None and by_name["good"].summary.health == "Healthy"
            # a store error names the store and what SQLite said (graph/store.py: StoreError)
            assert by_name["broken"].error.startswith("StoreError: state store ")
            assert "state.db: unable to open database file" in by_name["broken"].error
            assert any(n.startswith("broken: check-in failed (StoreError: state store") for n in rep.notes)
        # the summary and round 1's entry; round 2 of an offline run with nothing new appends nothing
        assert (root / "good" / "STATUS.md").read_text().count("<!-- rlagent:checkin") == 2
    finally:
        watcher.close()


def test_a_hanging_check_in_delays_no_other_run(tmp_path):
    root, home = tmp_path / "runs", tmp_path / "home"
    for name in ("a", "b", "slow"):
        simulate("healthy-h", root / name)
    release = threading.Event()

    class Stuck(Monitor):
        def check_in(self, now=None):
            release.wait(30)  # a check-in stuck on a dead NFS mount, say
            return super().check_in(now)

    watcher = make_watcher([root], home, checkin_timeout="1s", workers=2)
    plain = watcher.make_monitor
    watcher.make_monitor = lambda run: Stuck(run, home=home, offline=True) if run.name == "slow" else plain(run)
    try:
        started = time.monotonic()
        one = watcher.round()
        assert time.monotonic() - started < 8
        assert sorted(o.run.name for o in one.outcomes) == ["a", "b"] and one.still_running[0].startswith("slow")
        two = watcher.round()  # the stuck one is skipped, the others go on
        assert sorted(o.run.name for o in two.outcomes) == ["a", "b"] and two.seconds < 2
        release.set()
        time.sleep(1.0)
        three = watcher.round()
        assert "slow" in [o.run.name for o in three.outcomes]
    finally:
        release.set()
        watcher.close()


def test_at_ctrl_c_queued_check_ins_are_cancelled_and_only_the_running_one_is_waited_for(tmp_path):
    root, home = tmp_path / "runs", tmp_path / "home"
    for name in ("a", "b", "c"):
        simulate("healthy-h", root / name)
    release, started = threading.Event(), []

    class Slow(Monitor):
        def check_in(self, now=None):
            started.append(self.run.name)
            release.wait(30)
            return super().check_in(now)

    watcher = make_watcher([root], home, checkin_timeout="1s", workers=1)
    watcher.make_monitor = lambda run: Slow(run, home=home, offline=True)
    try:
        one = watcher.round()  # one check-in running, two waiting for the only worker
        assert len(one.still_running) == 3 and len(started) == 1
        assert watcher.cancel_queued() == 2 and watcher.in_flight() == 1  # what `watch` says it waits for
        release.set()
        watcher.finish(30)
        time.sleep(0.2)  # a cancelled check-in would have started by now
        assert watcher.in_flight() == 0 and len(started) == 1
        assert [p.parent.name for p in root.rglob("STATUS.md")] == started  # the others were never begun
    finally:
        release.set()
        watcher.close()


def test_degraded_and_down_runs_are_checked_sooner(tmp_path):
    root, home = tmp_path / "runs", tmp_path / "home"
    simulate("healthy-h", root / "ok")
    simulate("crash-oom-h", root / "down")
    simulate("truncation-l", root / "meh")
    watcher = make_watcher([root], home, cadence_s=3600, min_cadence="1m")
    try:
        watcher.round()
        gap = {s.run.name: round(s.due - s.started) for s in watcher.slots.values()}
        assert gap == {"ok": 3600, "down": 900, "meh": 900}
        assert watcher.round().outcomes == []  # none due yet
        assert 0 < watcher.next_in() <= 900
    finally:
        watcher.close()


def test_a_root_with_thousands_of_non_run_folders(tmp_path):
    root = tmp_path / "scratch"
    for i in range(3000):
        (root / f"d{i // 100}" / f"e{i}").mkdir(parents=True)
    run = simulate("healthy-h", root / "d7" / "real-run")
    (root / "loop").symlink_to(root)  # a symlink loop is visited once
    started = time.monotonic()
    runs, notes = find_runs([root, tmp_path / "missing"])
    took = time.monotonic() - started
    assert [r.run_dir for r in runs] == [str(run.resolve())]
    assert notes == [f"{tmp_path / 'missing'}: no such directory"]
    assert took < 5, took


def test_a_run_whose_backlog_is_left_part_read_is_checked_again_sooner(tmp_path, monkeypatch):
    """A TRL console is read oldest first, for up to READ_BUDGET_S a check-in: a Healthy run whose
    check-in stopped there is due again at the fast cadence, and at the cadence once caught up."""
    from rlagent.commands.fleet_status import fleet_rows
    from rlagent.evals.simulator.frameworks.registry import FRAMEWORK_SCENARIOS
    from rlagent.evals.simulator.frameworks.writer import write_framework_run
    from rlagent.tools.adapters import lineblocks

    root, home = tmp_path / "runs", tmp_path / "home"
    write_framework_run(FRAMEWORK_SCENARIOS["trl-healthy"].variant(samples_kept=1), root / "trl")
    simulate("healthy-h", root / "ok")
    console = root / "trl" / "train.log"
    monkeypatch.setattr(lineblocks, "CHUNK", 2048)  # the simulated console is many blocks
    monkeypatch.setattr(lineblocks, "READ_BUDGET_S", 0.0)  # spent once the first block is read
    report = tmp_path / "fleet.html"
    watcher = make_watcher([root], home, cadence_s=3600, min_cadence="1m", report=report)
    try:
        first = {o.run.name: o.summary for o in watcher.round().outcomes}
        assert first["trl"].health == first["ok"].health == "Healthy" and first["trl"].behind and not first["ok"].behind
        gap = {s.run.name: round(s.due - s.started) for s in watcher.slots.values()}
        assert gap == {"ok": 3600, "trl": 900}
        assert "behind the run" in (root / "trl" / "STATUS.md").read_text()
        # the fleet table and the report say its step is where the reading got to, not the run
        rows = {row["run"]: row for row in fleet_rows(root, home, 3)[0]}
        assert rows["trl"]["behind"] and not rows["ok"]["behind"]
        assert report.read_text().count("(catching up)") == 1
        table = subprocess.run(
            [sys.executable, "-m", "rlagent", "status", str(root), "--home", str(home)], capture_output=True, text=True
        )
        assert [line.split()[1] for line in table.stdout.splitlines() if "(catching up)" in line] == ["trl"], table.stdout

        monkeypatch.setattr(lineblocks, "READ_BUDGET_S", 20.0)
        slot = next(s for s in watcher.slots.values() if s.run.name == "trl")
        slot.due = 0.0  # its fast-cadence time, come
        [caught_up] = watcher.round().outcomes
        assert caught_up.summary.health == "Healthy" and not caught_up.summary.behind
        assert round(slot.due - slot.started) == 3600
        assert console.stat().st_size > 10 * lineblocks.CHUNK
        assert not {row["run"]: row for row in fleet_rows(root, home, 3)[0]}["trl"]["behind"]
        assert "(catching up)" not in report.read_text()
    finally:
        watcher.close()
