"""Multi-node log trees (evals/simulator/multinode.py) read by the collector and judged by the
cluster rules: the first failing rank named as the root cause, a node gone silent, hundreds of
rank files read incrementally and bounded, both layouts."""

from __future__ import annotations

import os
import re
import time
from datetime import UTC, timedelta

import pytest

from rlagent.evals.simulator.multinode import Failure, Silence, write_many_ranks, write_tree
from rlagent.graph.runner import Effects, Monitor
from rlagent.models.run import Layout
from rlagent.tools import multinode
from rlagent.tools.clock import SystemClock
from rlagent.tools.layout import discover_run

from conftest import loguru_line
from runbuilder import START, HRun


class NoCluster:
    def probe(self, run_dir):
        return None


def monitor(run: HRun, tmp_path, when=None):
    clock = SystemClock(lambda: when or run.clock)
    return Monitor(discover_run(run.dir), home=tmp_path / "home", effects=Effects(clock=clock, cluster=NoCluster()))


def findings(state):
    return {f.id: f for f in state.out.findings}


def test_the_first_failing_rank_is_named_as_the_root_cause(tmp_path):
    run = HRun(tmp_path, "mn-run")
    run.steps(10)
    write_tree(
        run.dir, "H", trainer_nodes=2, ranks_per_node=4, steps=10, start=START, failure=Failure(node=1, local_rank=2, step=8)
    )
    state = monitor(run, tmp_path, START + timedelta(minutes=30)).check_in()
    view = state.out.observation.multinode
    assert view is not None and view.total_files == 2 + 16 + 2  # node logs, rank files, inference node + router
    assert view.nodes("trainer") == [0, 1]
    found = findings(state)["rank_failed"]
    assert found.severity.value == "critical"
    assert "rank 6 (local_rank: 2)" in found.summary and "host node-2" in found.summary  # torchrun's own Root Cause
    assert "torchrun's Root Cause" in found.summary
    assert "Watchdog caught collective operation timeout" in found.summary  # the others, grouped
    assert any("torchrun/f3a9c2e1_1/attempt_0/2/stderr.log" in e for e in found.evidence)  # the failing rank's traceback


def test_without_torchrun_block_the_earliest_dated_error_is_the_root_cause(tmp_path):
    run = HRun(tmp_path, "mn-run")
    base = write_tree(run.dir, "H", steps=10, start=START, failure=Failure(node=0, local_rank=1, step=6))
    node0 = base / "trainer" / "node_0.log"
    node0.write_text(node0.read_text().split("Fatal error")[0])  # no Root Cause block
    read = multinode.read_tree(run.dir, Layout.H, {}, UTC)
    files = {f.file: f for f in read.view.files}
    first, how = multinode.first_failure(read.events, files)
    assert how == "the earliest error record across nodes and ranks"
    assert first.file.endswith("f3a9c2e1_0/attempt_0/0/stdout.log") or "Watchdog" in first.message


def test_a_node_silent_while_the_others_progress(tmp_path):
    run = HRun(tmp_path, "mn-run")
    run.steps(40, step_seconds=30)
    write_tree(run.dir, "H", trainer_nodes=3, ranks_per_node=2, steps=40, start=START, silence=Silence(node=2, after_step=10))
    state = monitor(run, tmp_path, START + timedelta(seconds=41 * 30)).check_in()
    found = findings(state)["node_silent"]
    assert found.summary.startswith("trainer node 2")
    assert "last step 10, others at 40" in found.summary
    assert "rank_failed" not in findings(state)


def test_layout_l_reads_the_same_tree(tmp_path):
    run_dir = tmp_path / "l-run"
    (run_dir / "configs").mkdir(parents=True)
    (run_dir / "configs" / "trainer.toml").write_text("max_steps = 20\n")
    (run_dir / "logs").mkdir()
    write_tree(run_dir, "L", steps=8, start=START, failure=Failure(node=1, local_rank=0, step=5))
    read = multinode.read_tree(run_dir, Layout.L, {}, UTC)
    assert {f.file.split("/")[1] for f in read.view.files} == {"trainer", "inference"}
    assert any(e.kind == "root_cause" for e in read.events)


def test_hundreds_of_rank_files_are_read_bounded_and_incrementally(tmp_path):
    run = HRun(tmp_path, "big")
    write_many_ranks(run.dir, "H", files=256, lines=50)
    started = time.monotonic()
    first = multinode.read_tree(run.dir, Layout.H, {}, UTC)
    took = time.monotonic() - started
    ranks = [f for f in first.view.files if f.stream]
    assert len(ranks) == 256 and took < 5, took
    again = multinode.read_tree(run.dir, Layout.H, first.cursors, UTC)
    assert again.view.bytes_read == 0 and len(again.view.files) == len(first.view.files)
    # a huge growth of one file is read from its tail, with a note
    big = next(f for f in ranks if f.stream == "stdout")
    with open(run.dir / big.file, "a") as handle:
        handle.write("12:00:00    INFO x\n" * 40000)
    third = multinode.read_tree(run.dir, Layout.H, again.cursors, UTC)
    assert third.view.bytes_read <= multinode.PER_FILE_BYTES
    assert any("bytes skipped" in n for n in third.notes)
    assert third.cursors[big.file].lines == 50 + 40000


def test_the_file_bound_is_said(tmp_path, monkeypatch):
    run = HRun(tmp_path, "big")
    write_many_ranks(run.dir, "H", files=64, lines=2)
    monkeypatch.setattr(multinode, "MAX_FILES", 10)
    paths, total = multinode.list_tree(run.dir, Layout.H, limit=10)
    assert len(paths) == 10 and total > 64


@pytest.mark.parametrize("change", ["append", "touch", "replace_same_size"])
def test_quiet_rank_files_are_not_opened_again_and_a_changed_one_is_read(tmp_path, monkeypatch, change):
    """A warm check-in of a big tree: the rank files read to their end and unchanged since keep
    their cursors as they are and are not opened; the one that changed is read as before."""
    run = HRun(tmp_path, "big")
    write_many_ranks(run.dir, "H", files=64, lines=5)
    first = multinode.read_tree(run.dir, Layout.H, {}, UTC)
    busy = next(f.file for f in first.view.files if f.stream == "stdout")
    path = run.dir / busy
    if change == "append":
        with open(path, "a") as handle:
            handle.write("12:00:01    ERROR rank 3 lost its peer\n")
    elif change == "touch":  # same bytes, a new modification time: perhaps rewritten in place
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    else:  # rotated: another file of the same size in its place
        data = path.read_bytes()
        path.with_suffix(".new").write_bytes(b"X" + data[1:])
        os.replace(path.with_suffix(".new"), path)
    planned = []
    real = multinode.plan_read
    monkeypatch.setattr(multinode, "plan_read", lambda p, rel, cursor: planned.append(rel) or real(p, rel, cursor))
    again = multinode.read_tree(run.dir, Layout.H, first.cursors, UTC)
    assert planned == [busy]
    quiet = [rel for rel in first.cursors if rel != busy]
    assert len(quiet) > 60 and all(again.cursors[rel] is first.cursors[rel] for rel in quiet)
    assert again.cursors.keys() == first.cursors.keys()
    if change == "append":
        assert [(e.file, e.message) for e in again.events] == [(busy, "rank 3 lost its peer")]
        assert again.cursors[busy].lines == first.cursors[busy].lines + 1
    elif change == "replace_same_size":
        assert any("replaced (rotated)" in n for n in again.notes)
        assert again.cursors[busy].offset == path.stat().st_size
    else:
        assert again.cursors[busy].mtime_ns == path.stat().st_mtime_ns


def test_a_node_whose_log_had_an_error_is_judged_the_same_at_the_next_check_in(tmp_path):
    """A file's error records count from the start of the attempt, not per read: a node whose log
    had an error and then went quiet is left out of node_silent's peers at the check-in that read
    the error and at the next one, which reads nothing new (it was counted per read, and the next
    check-in named the node silent too, with another summary for the same run)."""
    run = HRun(tmp_path, "mn-run")
    run.steps(40, step_seconds=30)
    silence = Silence(node=2, after_step=10)
    base = write_tree(run.dir, "H", trainer_nodes=3, ranks_per_node=2, steps=40, start=START, silence=silence)
    node2 = base / "trainer" / "node_2.log"
    last = re.findall(r"(\d\d:\d\d:\d\d)\x1b\[0m \x1b\[32m\x1b\[1mSUCCESS", node2.read_text())[-1]
    with open(node2, "a") as handle:
        handle.write(f"{last}   ERROR Lost connection to the trainer peer on node 0\n")
    checks = monitor(run, tmp_path, START + timedelta(seconds=41 * 30))
    first, second = checks.check_in(), checks.check_in()
    for state in (first, second):
        files = {f.file: f for f in state.out.observation.multinode.files}
        assert files[str(node2.relative_to(run.dir))].errors == 1
    summaries = [findings(state)["node_silent"].summary for state in (first, second)]
    assert summaries[0] == summaries[1]
    assert summaries[0].startswith("trainer node 2 rank 0 (stdout), trainer node 2 rank 1 (stdout) silent")
    assert "rank_failed" in findings(second)


WATCHDOG = "Watchdog caught collective operation timeout"


def _one_rank_fails_then_its_peers_time_out(run: HRun, failure: Failure) -> tuple[str, dict]:
    """A tree of 256 ranks whose failing rank logs a dated error first, then every other rank times
    out 10 minutes later (torchrun's Root Cause block cut off, as when the node's log was lost).
    Returns the failing rank's file and the timeouts, cut off to be appended later."""
    base = write_tree(run.dir, "H", trainer_nodes=8, ranks_per_node=32, steps=10, start=START, failure=failure)
    node0 = base / "trainer" / "node_0.log"
    node0.write_text(node0.read_text().split("Fatal error")[0])
    fail_t = START + timedelta(seconds=failure.step * 30 - 15)
    rank = base / "trainer" / "torchrun" / f"f3a9c2e1_{failure.node}" / "attempt_0" / str(failure.local_rank)
    with (rank / "stdout.log").open("a") as handle:
        handle.write(loguru_line(fail_t.astimezone().strftime("%H:%M:%S"), "ERROR", "CUDA error: an illegal memory access"))
    timeouts = {}
    for path in (base / "trainer" / "torchrun").glob("*/attempt_0/*/stdout.log"):
        text = path.read_text()
        if WATCHDOG in text:
            cut = text.rindex("\n", 0, text.index(WATCHDOG)) + 1
            timeouts[path] = text[cut:]
            path.write_text(text[:cut])
    assert len(timeouts) == 255
    return (rank / "stdout.log").relative_to(run.dir).as_posix(), timeouts


@pytest.mark.parametrize(("check_ins", "node"), [(1, 0), (1, 5), (2, 0), (2, 5)])
def test_the_first_failing_rank_outlives_the_bound_on_kept_events(tmp_path, check_ins, node):
    """More error records than a check-in keeps of a kind (the newest 50): the earliest, the root
    cause, is still the one named, whether the timeouts come in its check-in or a later one, and
    wherever its file comes in the order the tree is read."""
    run = HRun(tmp_path, "mn-run")
    run.steps(10)
    failing, timeouts = _one_rank_fails_then_its_peers_time_out(run, Failure(node=node, local_rank=3, step=8))
    mon = monitor(run, tmp_path, START + timedelta(minutes=30))
    if check_ins == 2:
        first = findings(mon.check_in())["rank_failed"]
        assert first.evidence[0].startswith(failing), first.evidence
    for path, lines in timeouts.items():
        with path.open("a") as handle:
            handle.write(lines)
    found = findings(mon.check_in())["rank_failed"]
    assert found.evidence[0].startswith(failing), found.evidence
    assert "CUDA error: an illegal memory access" in found.summary.split(", by ")[0], found.summary
    # every record counted (the 255 timeouts, the failing rank's error and its traceback), not only those kept
    assert "257 error records on 257 node/rank logs" in found.summary, found.summary


def test_a_new_attempt_s_first_failing_rank_is_named_not_the_last_attempt_s(tmp_path):
    """Two crashes of 256 ranks, one per attempt: the first failure of each is kept, and the one
    named is the current attempt's (the kept events still hold the attempt before's)."""
    run = HRun(tmp_path, "mn-run")
    run.steps(10)
    failing, timeouts = _one_rank_fails_then_its_peers_time_out(run, Failure(node=0, local_rank=3, step=8))
    for path, lines in timeouts.items():
        with path.open("a") as handle:
            handle.write(lines)
    mon = monitor(run, tmp_path, START + timedelta(minutes=30))
    assert findings(mon.check_in())["rank_failed"].evidence[0].startswith(failing)
    run.new_attempt()
    run.steps(10)
    failing, timeouts = _one_rank_fails_then_its_peers_time_out(run, Failure(node=6, local_rank=17, step=8))
    assert failing.startswith("logs/attempt_2/")
    mon.check_in()
    for path, lines in timeouts.items():
        with path.open("a") as handle:
            handle.write(lines)
    state = mon.check_in()
    assert findings(state)["rank_failed"].evidence[0].startswith(failing), findings(state)["rank_failed"].evidence
    kept = [e for e in state.memory.events if e.kind == "rank_error"]
    assert {e.file.split("/")[1] for e in kept} == {"attempt_1", "attempt_2"}
