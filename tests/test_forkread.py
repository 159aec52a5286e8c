"""Reads split over a forked child: the same results as one process, in order, and nothing lost
when the child fails.

Each scenario runs in a fresh interpreter: run_split forks only in a process with one thread, and
the test session keeps the daemon threads of earlier tests (`rlagent watch`'s pools) alive.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

needs_two_cpus = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="a child reads only where there are two CPUs (tested below)"
)

COMMON = """
import json, os, sys, time
from functools import partial
from rlagent.tools import forkread
BIG = forkread.SPLIT_FROM
PARENT = os.getpid()

def work(i):  # long enough that both processes take tasks from the queue
    time.sleep(0.02)
    return (i, i * i, os.getpid())
"""


def run_scenario(body: str, tmp_path: Path) -> dict:
    script = tmp_path / "scenario.py"
    script.write_text(COMMON + textwrap.dedent(body))
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_two_cpus
def test_split_reads_give_the_serial_results_in_order_from_both_processes(tmp_path):
    out = run_scenario(
        """
        results = forkread.run_split([partial(work, i) for i in range(12)], [BIG] * 12)
        print(json.dumps({"results": results, "parent": PARENT, "stats": vars(forkread.stats)}))
        """,
        tmp_path,
    )
    assert [r[:2] for r in out["results"]] == [[i, i * i] for i in range(12)]
    pids = {r[2] for r in out["results"]}
    assert out["parent"] in pids and len(pids) == 2  # the child did some, this process the rest
    child_done = sum(r[2] != out["parent"] for r in out["results"])
    assert out["stats"]["splits"] == 1 and out["stats"]["child_tasks"] == child_done > 0
    assert out["stats"]["peak_child_rss_kb"] > 0


@needs_two_cpus
def test_the_longest_tasks_by_cost_are_taken_first(tmp_path):
    """Tasks of one size but different costs (a GB of vLLM lines beside 50 MB of warnings): the
    costly ones start in the first wave, one per process, whatever their place in the list."""
    out = run_scenario(
        """
        def timed(i):
            started = time.monotonic()
            time.sleep(0.3)
            return (i, started, os.getpid())

        results = forkread.run_split([partial(timed, i) for i in range(6)], [BIG] * 6, [1, 1, 1, 1, 50, 60])
        print(json.dumps({"results": results}))
        """,
        tmp_path,
    )
    started = {i: at for i, at, _ in out["results"]}
    first_wave = sorted(started, key=started.get)[:2]
    assert sorted(first_wave) == [4, 5]
    assert len({pid for i, _, pid in out["results"] if i in (4, 5)}) == 2  # one in each process


def test_small_reads_threaded_processes_and_one_cpu_stay_in_one_process(tmp_path):
    out = run_scenario(
        """
        import threading
        small = forkread.run_split([partial(work, i) for i in range(4)], [1000] * 4)
        hold = threading.Event()
        other = threading.Thread(target=hold.wait, daemon=True)  # as `rlagent watch` has
        other.start()
        threaded = forkread.run_split([partial(work, i) for i in range(4)], [BIG] * 4)
        hold.set()
        other.join()
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one CPU: a child would only add memory
        one_cpu = forkread.run_split([partial(work, i) for i in range(4)], [BIG] * 4)
        pids = {r[2] for r in small + threaded + one_cpu}
        print(json.dumps({"pids": sorted(pids), "parent": PARENT, "splits": forkread.stats.splits}))
        """,
        tmp_path,
    )
    assert out["pids"] == [out["parent"]] and out["splits"] == 0


@needs_two_cpus
def test_a_child_killed_midway_loses_nothing(tmp_path):
    out = run_scenario(
        """
        import signal
        tried = sys.argv[1] + "/child-tried"

        def dies_in_child(i):
            if os.getpid() != PARENT:
                with open(tried, "a") as f:
                    f.write(f"{i}\\n")
                os.kill(os.getpid(), signal.SIGKILL)
            return work(i)

        results = forkread.run_split([partial(dies_in_child, i) for i in range(6)], [BIG] * 6)
        print(json.dumps({"results": results, "parent": PARENT, "tried": open(tried).read().split(),
                          "child_tasks": forkread.stats.child_tasks}))
        """,
        tmp_path,
    )
    assert out["tried"]  # the child took a task and died in it
    assert [r[:2] for r in out["results"]] == [[i, i * i] for i in range(6)]
    assert {r[2] for r in out["results"]} == {out["parent"]} and out["child_tasks"] == 0


@needs_two_cpus
def test_a_result_the_child_cannot_send_is_computed_here(tmp_path):
    out = run_scenario(
        """
        import threading

        def unpicklable_in_child(i):
            time.sleep(0.02)
            return threading.Lock() if os.getpid() != PARENT else (i, os.getpid())

        results = forkread.run_split([partial(unpicklable_in_child, i) for i in range(6)], [BIG] * 6)
        print(json.dumps({"results": results, "parent": PARENT}))
        """,
        tmp_path,
    )
    assert out["results"] == [[i, out["parent"]] for i in range(6)]


@needs_two_cpus
def test_an_exception_here_propagates_and_leaves_no_child(tmp_path):
    out = run_scenario(
        """
        ran = sys.argv[1] + "/ran"

        def fails_here(i):
            with open(ran, "a") as f:
                f.write(f"{os.getpid()}\\n")
            time.sleep(0.02)
            if os.getpid() == PARENT:
                raise ValueError("boom")
            return i

        try:
            forkread.run_split([partial(fails_here, i) for i in range(40)], [BIG] * 40)
            raised = None
        except ValueError as exc:
            raised = str(exc)
        try:
            os.waitpid(-1, os.WNOHANG)
            children = "some"
        except ChildProcessError:
            children = "none"
        in_child = sum(pid != str(PARENT) for pid in open(ran).read().split())
        print(json.dumps({"raised": raised, "children": children, "in_child": in_child}))
        """,
        tmp_path,
    )
    assert out["raised"] == "boom" and out["children"] == "none"
    assert out["in_child"] <= 2  # the child stopped after the task it had, not after the 40 of the queue


@needs_two_cpus
def test_the_prime_rl_adapter_reads_a_run_the_same_split_or_not(tmp_path):
    """A simulated layout-H run (logs and metrics.jsonl), read cold and then warm after more steps
    are appended: every file's events, groups, rows, cursors and notes agree with a serial read."""
    out = run_scenario(
        """
        from datetime import UTC
        from pathlib import Path
        from rlagent.evals.simulator import append_big_h_run, write_big_h_run
        from rlagent.tools.adapters import discover
        from rlagent.tools.adapters.primerl import PrimeRLAdapter

        run = write_big_h_run(Path(sys.argv[1]) / "run", 6 << 20)
        info = discover(run)

        def read(cursors, split):
            forkread.SPLIT_FROM = 0 if split else 1 << 62
            got = PrimeRLAdapter().read(info, cursors, UTC)
            return got, [repr(f) for f in got.files]

        agree = []
        cursors = {}
        for _ in range(2):
            before = forkread.stats.child_tasks
            split, split_repr = read(dict(cursors), True)
            used_child = forkread.stats.child_tasks > before
            _, serial_repr = read(dict(cursors), False)
            agree.append([split_repr == serial_repr, used_child, len(split_repr)])
            cursors = {f.rel: f.cursor for f in split.files if f.cursor is not None}
            append_big_h_run(run, 1 << 20)
        print(json.dumps({"agree": agree}))
        """,
        tmp_path,
    )
    assert out["agree"] == [[True, True, out["agree"][0][2]], [True, True, out["agree"][1][2]]]
    assert out["agree"][0][2] >= 4  # the logs and metrics.jsonl
