"""Benchmark a check-in on layout-H runs of realistic logs, side by side with cat and grep.

    python bench/bench_checkin.py                        # 1 GB and 4 GB runs under bench/out/
    python bench/bench_checkin.py --sizes 1G --repeats 9
    python bench/bench_checkin.py --sizes 1G --long 100000   # plus a run with 100,000 steps of history

For each run, in the same run of this script (the machine may be shared: every figure is a median
of --repeats, and the load average is printed with each row):
  cat   `cat` of the run's log files to /dev/null: reading the bytes.
  grep  `grep -cE "WARNING|ERROR"` over the same files: what the runbook does by hand.
  (a) a cold first check-in: a fresh monitor process per repeat, fresh state; wall and CPU time
      (user + sys of the process, all threads, and of the child that shares a big read with it:
      tools/forkread.py) of the check-in alone, and the peak RSS (the child's, which counts the
      pages it shares with the monitor too, in the JSON). `read MB` is
      what it moved past: a console backlog over 64 MB is parsed as its first 4 MB and newest
      60 MB for verl and OpenRLHF (the middle only counted), and whole for TRL, oldest first, for
      up to lineblocks.READ_BUDGET_S (20 s) a check-in.
  (b) a warm check-in after 1 MB more is appended, timed inside the running monitor (Python
      start-up not counted, the garbage collector set as the program sets it); wall and CPU.
  (d) `rlagent check RUN --offline --json` as a whole process on the warm run, and next to it the
      floor of the stack: a Python that only imports langgraph's graph and SQLite checkpointer, and
      the same with cyclic collections held, as the program holds them while it imports (`held`).
      All with their bytecode cached, as after `pip install` (PYTHONPYCACHEPREFIX under --out).
The appends are written by this process, not the monitor, so they do not count in its RSS.

Besides prime-rl's layout H (`--sizes`), the table covers (each can be left out with an empty value):
  --frameworks  the main console log of a SIMULATED verl, TRL and OpenRLHF run, grown to the size given by
                repeating the steps of a 2000-step simulation with rising step numbers (what the monitor
                reads of them: the log; warm appends are the next steps);
  --multinode   a layout-H run of 256 MB with a multi-node tree of this many rank files
                (evals/simulator/multinode.py `write_tree`: 32 nodes of 8 ranks for 256).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlagent.evals.simulator import append_big_h_run, write_big_h_run

MONITOR = """
import json, resource, sys, time
from pathlib import Path
from rlagent.graph.runner import Monitor
from rlagent.tools.adapters import discover
import rlagent
rlagent.settle_collector()  # as the rlagent program does once its imports are done
monitor = Monitor(discover(Path(sys.argv[1])), home=Path(sys.argv[2]), offline=True)
from rlagent.tools import forkread
def cpu():  # the reading child of a big read (tools/forkread.py) counts too: it is reaped in the check-in
    r, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime
def peak_rss_mb():
    # VmHWM, this process's own peak: Linux carries ru_maxrss over from the forking parent (the
    # benchmark, which holds a framework log's block) through exec, ru_maxrss would report that.
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
for command in sys.stdin:
    started, cpu_started = time.perf_counter(), cpu()
    state = monitor.check_in()
    elapsed, cpu_s = time.perf_counter() - started, cpu() - cpu_started
    rss_mb = peak_rss_mb()
    print(json.dumps({"seconds": elapsed, "cpu_s": cpu_s, "bytes_read": state.out.observation.bytes_read,
                      "step": state.out.observation.trainer_step, "peak_rss_mb": rss_mb,
                      "child_rss_mb": forkread.stats.peak_child_rss_kb / 1024}), flush=True)
"""
FLOOR = "import langgraph.graph, langgraph.checkpoint.sqlite"
HELD_FLOOR = "import gc; gc.disable(); " + FLOOR
"""The same imports with cyclic collections held, as the `rlagent` program holds them while it imports
(rlagent/__init__.py): the floor rlagent's own imports and its check-in are measured above."""


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def log_files(run: Path) -> list[str]:
    main = FRAMEWORK_LOG.get(run.name.split("-", 1)[0])
    if main is not None:
        return [str(run / main)]
    return sorted(str(p) for p in (run / "logs" / "latest").resolve().rglob("*.log"))


# --- framework console logs, grown from a simulated run ---------------------------------------

FRAMEWORK_LOG = {"verl": "verl_demo.log", "trl": "train.log", "openrlhf": "train.log"}
STEP_NUMBERS = {
    "verl": rb"(?<=step:)\d+|(?<=global_step_)\d+",
    "trl": rb"(?<=\| )\d+(?=/\d)",  # the progress bar's count (its total stays)
    "openrlhf": rb"(?<=Global step )\d+|(?<=global_step)\d+",
}
SIM_STEPS = 2000
BLOCK_FROM = 100
"""Steps from this one on are repeated (past the start-up lines)."""


def _block(log: Path, framework: str) -> bytes:
    """The simulated log from the line of step BLOCK_FROM to its end (whole lines)."""
    data = log.with_name(log.name + ".sim").read_bytes()
    pattern = re.compile(STEP_NUMBERS[framework])
    for match in pattern.finditer(data):
        if int(match.group()) >= BLOCK_FROM:
            return data[data.rfind(b"\n", 0, match.start()) + 1 :]
    raise SystemExit(f"{log}: no step {BLOCK_FROM}")


def _renumbered(block: bytes, framework: str, shift: int) -> bytes:
    return re.sub(STEP_NUMBERS[framework], lambda m: str(int(m.group()) + shift).encode(), block)


def grow_framework_log(framework: str, run: Path, n_bytes: int) -> None:
    """Append about `n_bytes` of the next steps: the block again, its step numbers moved on."""
    log = run / FRAMEWORK_LOG[framework]
    block = _block(log, framework)
    state = run / ".bench-repeats"
    repeats = int(state.read_text()) if state.exists() else 0
    span = SIM_STEPS - BLOCK_FROM + 1
    with log.open("ab") as f:
        while n_bytes > 0:
            cut = block.find(b"\n", n_bytes) + 1  # a short append: the first steps of a repeat
            part = block[:cut] if cut else block
            repeats += 1
            f.write(_renumbered(part, framework, repeats * span))
            n_bytes -= len(part)
    state.write_text(str(repeats))


def framework_run(out: Path, framework: str, size: int) -> Path:
    run = out / f"{framework}-{size >> 20}M"
    log = run / FRAMEWORK_LOG[framework]
    if log.is_file() and log.stat().st_size >= size:
        return run
    simulate = [sys.executable, "-m", "rlagent", "simulate", f"{framework}-healthy", str(run), "--overwrite"]
    subprocess.run([*simulate, "--steps", str(SIM_STEPS)], check=True, capture_output=True)
    shutil.copyfile(log, log.with_name(log.name + ".sim"))
    grow_framework_log(framework, run, size - log.stat().st_size)
    return run


def multinode_run(out: Path, ranks: int) -> Path:
    """A 256 MB layout-H run with a tree of `ranks` rank files (8 per node)."""
    from rlagent.evals.simulator.multinode import write_tree

    run = out / f"multinode-h-{ranks}"
    if not run.exists():
        write_big_h_run(run, 256 << 20)
        write_tree(run, "H", trainer_nodes=max(1, ranks // 8), ranks_per_node=min(8, ranks), steps=200)
    return run


def append(run: Path, n_bytes: int) -> None:
    framework = run.name.split("-", 1)[0]
    if framework in FRAMEWORK_LOG:
        grow_framework_log(framework, run, n_bytes)
    else:
        append_big_h_run(run, n_bytes)


def timed(command: list[str], check: bool = True) -> float:
    return timed_cpu(command, check)[0]


def timed_cpu(command: list[str], check: bool = True, to_file: bool = False) -> tuple[float, float]:
    """Wall and CPU (user + sys) seconds of a command; `rlagent check` exits 1 or 2 on findings.
    `to_file`: output to a file, as GNU grep stops at its first match when it writes to /dev/null."""
    with tempfile.TemporaryFile() as sink:
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdout=sink if to_file else subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
    if check and os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command[0]} failed")
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime


def grep_hits(files: list[str]) -> int:
    done = subprocess.run(["grep", "-cE", "WARNING|ERROR", *files], capture_output=True, text=True, check=False)
    return sum(int(line.rsplit(":", 1)[-1]) for line in done.stdout.split())


class MonitorProcess:
    def __init__(self, run: Path, home: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", MONITOR, str(run), str(home)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def check_in(self) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write("check\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait()


def bench_run(name: str, run: Path, repeats: int, warm_runs: int) -> dict:
    files = log_files(run)
    subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)  # same page cache for all
    load_before = os.getloadavg()[0]
    logs_bytes = sum(Path(f).stat().st_size for f in files)
    cat, grep, cold = [], [], []
    for _ in range(repeats):  # interleaved, so a burst of load hits every column alike
        cat.append(timed_cpu(["cat", *files]))
        grep.append(timed_cpu(["grep", "-cE", "WARNING|ERROR", *files], check=False, to_file=True))  # 1: no match
        home = Path(tempfile.mkdtemp(prefix="rlagent-bench-"))
        monitor = MonitorProcess(run, home)
        cold.append(monitor.check_in())
        monitor.close()
        shutil.rmtree(home)
    home = Path(tempfile.mkdtemp(prefix="rlagent-bench-"))
    monitor = MonitorProcess(run, home)
    monitor.check_in()
    warm = []
    for _ in range(warm_runs):
        append(run, 1 << 20)
        warm.append(monitor.check_in())
    monitor.close()
    rlagent = str(Path(sys.executable).with_name("rlagent"))
    whole, floor, held_floor = [], [], []
    timed([rlagent, "check", str(run), "--offline", "--json", "--home", str(home)], check=False)  # bytecode cached
    for _ in range(repeats):
        append(run, 1 << 20)
        whole.append(timed([rlagent, "check", str(run), "--offline", "--json", "--home", str(home)], check=False))
        floor.append(timed([sys.executable, "-c", FLOOR]))
        held_floor.append(timed([sys.executable, "-c", HELD_FLOOR]))
    shutil.rmtree(home)
    med = statistics.median
    cat_s, grep_s, cold_s = med(c[0] for c in cat), med(g[0] for g in grep), med(c["seconds"] for c in cold)
    grep_cpu = med(g[1] for g in grep)
    return {
        "run": name,
        "logs_mb": logs_bytes / 1e6,
        "steps": warm[-1]["step"],
        "grep_hits": grep_hits(files),
        "cat_s": cat_s,
        "grep_s": grep_s,
        "cold_s": cold_s,
        "cold_cpu_s": med(c["cpu_s"] for c in cold),
        "cat_cpu_s": med(c[1] for c in cat),
        "grep_cpu_s": grep_cpu,
        "cold_over_grep": cold_s / grep_s,
        "cold_cpu_over_grep_cpu": med(c["cpu_s"] for c in cold) / max(grep_cpu, 1e-3),
        "cold_over_cat": cold_s / cat_s,
        "cold_rss_mb": max(c["peak_rss_mb"] for c in cold),
        "cold_child_rss_mb": max(c["child_rss_mb"] for c in cold),
        "cold_read_mb": med(c["bytes_read"] for c in cold) / 1e6,
        "warm_ms": med(w["seconds"] for w in warm) * 1000,
        "warm_cpu_ms": med(w["cpu_s"] for w in warm) * 1000,
        "warm_bytes": med(w["bytes_read"] for w in warm),
        "warm_rss_mb": warm[-1]["peak_rss_mb"],
        "whole_process_s": med(whole),
        "stack_floor_s": med(floor),
        "held_floor_s": med(held_floor),
        "load_avg": (load_before, os.getloadavg()[0]),
    }


def long_run(out: Path, steps: int) -> Path:
    """An H run with `steps` steps of history and small batches (few log bytes per step)."""
    from rlagent.evals.simulator.bigrun import big_h_scenario
    from rlagent.evals.simulator.writer import _write

    run = out / f"long-h-{steps // 1000}k"
    if not run.exists():
        scenario = big_h_scenario(0).model_copy(
            update={
                "name": "long-h",
                "steps": steps,
                "max_steps": 2 * steps,
                "batch_size": 8,
                "group_size": 2,
                "turns": 1.0,
                "eval_interval": 1000,
                "ckpt_interval": 1000,
                "step_time_s": 30.0,
            }
        )
        _write(scenario, run, overwrite=True)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1G,4G")
    parser.add_argument("--long", type=int, default=0, help="also a run with this many steps of history")
    parser.add_argument("--frameworks", default="verl:1G,trl:256M,openrlhf:256M", help="framework:size of each main log")
    parser.add_argument("--multinode", type=int, default=256, help="rank files of the multi-node run (0: none)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warm-runs", type=int, default=9)
    args = parser.parse_args()
    # Python as an installed rlagent runs: `pip install` compiles the modules' bytecode once, so the
    # processes timed here keep theirs too (in a cache beside the runs, none written into the
    # checkout), whatever PYTHONDONTWRITEBYTECODE this shell has.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ.setdefault("PYTHONPYCACHEPREFIX", str(args.out.resolve() / "pycache"))
    runs: list[tuple[str, Path]] = []
    for size in filter(None, args.sizes.split(",")):
        run = args.out / f"big-h-{parse_size(size) >> 20}M"
        grown = run.exists() and sum(Path(f).stat().st_size for f in log_files(run)) > 1.25 * parse_size(size)
        if not run.exists() or grown:  # the warm rows' appends of earlier runs grow it: written again past 1.25x
            write_big_h_run(run, parse_size(size))
        runs.append((size, run))
    if args.long:
        runs.append((f"{args.long // 1000}k steps", long_run(args.out, args.long)))
    for item in filter(None, args.frameworks.split(",")):
        framework, size = item.split(":")
        runs.append((f"{framework} {size}", framework_run(args.out, framework, parse_size(size))))
    if args.multinode:
        runs.append((f"{args.multinode} ranks", multinode_run(args.out, args.multinode)))
    rows = [bench_run(name, run, args.repeats, args.warm_runs) for name, run in runs]
    print(
        f"{'run':>13} {'logs MB':>8} {'cat s (CPU)':>13} {'grep s (CPU)':>13} {'read MB':>7} {'(a) cold s (CPU)':>17} "
        f"{'/grep':>6} {'CPU/grep CPU':>12} {'(b) warm ms (CPU)':>17} {'(d) process s':>13} {'floor s':>7} {'held':>5} "
        f"{'RSS MB':>6} {'load':>9}"
    )
    for r in rows:
        print(
            f"{r['run']:>13} {r['logs_mb']:>8.0f} {r['cat_s']:>6.3f} ({r['cat_cpu_s']:.2f}) "
            f"{r['grep_s']:>6.3f} ({r['grep_cpu_s']:.2f}) {r['cold_read_mb']:>7.0f} "
            f"{r['cold_s']:>8.2f} ({r['cold_cpu_s']:>6.2f}) {r['cold_over_grep']:>5.1f}x {r['cold_cpu_over_grep_cpu']:>11.1f}x "
            f"{r['warm_ms']:>8.0f} ({r['warm_cpu_ms']:>5.0f}) {r['whole_process_s']:>13.2f} "
            f"{r['stack_floor_s']:>7.2f} {r['held_floor_s']:>5.2f} "
            f"{max(r['cold_rss_mb'], r['warm_rss_mb']):>6.0f} {r['load_avg'][0]:>4.1f}/{r['load_avg'][1]:.1f}"
        )
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
