"""The floor of a warm check-in: the same monitor, state store and history, with nodes that do nothing.

    python bench/bench_graph_floor.py                 # a 256 MB layout-H run under bench/out/
    python bench/bench_graph_floor.py --run bench/out/big-h-1024M --checkins 30   # a run bench_checkin made

A real monitor checks the run in once (cold), so the state holds the run's 1000-step history. Then,
in the same process, each figure is the median CPU time (`time.process_time`) of --checkins warm
check-ins with 1 MB appended before each (the append is not timed):
  real   the monitor as `rlagent run` uses it;
  floor  a monitor on the same state with collector, diagnostician and writer that change nothing:
         what is left is LangGraph's invoke with its SQLite checkpoint of the whole state, the run
         lock, and the fleet snapshot the alert book records after every check-in.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path

import rlagent
from rlagent.evals.simulator import append_big_h_run, write_big_h_run
from rlagent.graph.build import Nodes
from rlagent.graph.runner import Monitor
from rlagent.tools.adapters import discover


def _nothing(state) -> dict:
    return {}


def timed_checkins(monitor: Monitor, run: Path, n: int) -> list[float]:
    out = []
    for _ in range(n):
        append_big_h_run(run, 1 << 20)
        started = time.process_time()
        monitor.check_in()
        out.append(time.process_time() - started)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    parser.add_argument("--checkins", type=int, default=20)
    parser.add_argument("--run", type=Path, help="a layout-H run written by the simulator (default: a new 256 MB one)")
    args = parser.parse_args()
    rlagent.settle_collector()  # as the rlagent program does once its imports are done
    run = args.run or args.out / "floor-h-256M"
    if not run.exists():
        write_big_h_run(run, 256 << 20)
    home = args.out / "floor-home"
    shutil.rmtree(home, ignore_errors=True)
    info = discover(run)
    real = Monitor(info, home=home, offline=True)
    real.check_in()
    real_s = timed_checkins(real, run, args.checkins)
    real.close()
    floor = Monitor(info, home=home, offline=True, nodes=Nodes(collector=_nothing, diagnostician=_nothing, writer=_nothing))
    floor_s = timed_checkins(floor, run, args.checkins)
    steps = len(floor.graph.get_state(floor.config).values["memory"].history.trainer)
    floor.close()
    med = statistics.median
    print(f"history: {steps} trainer steps; median CPU of {args.checkins} warm check-ins")
    print(f"real  {med(real_s) * 1000:6.1f} ms")
    print(f"floor {med(floor_s) * 1000:6.1f} ms  (nodes that change nothing: graph, checkpoint, lock, fleet snapshot)")


if __name__ == "__main__":
    main()
