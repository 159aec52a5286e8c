"""Benchmark a check-in on a layout-H run with about 1 GB of realistic logs.

    python bench/bench_checkin.py                 # 250 MB and 1 GB runs under bench/out/
    python bench/bench_checkin.py --sizes 1G --warm-runs 9

Side by side, for each run size:
  (c) `grep -cE "WARNING|ERROR"` over the run's log files: what the runbook does by hand.
  (a) a cold first check-in: wall time and peak RSS of a fresh monitor process.
  (b) a warm check-in after 1 MB more is appended, timed inside the running monitor
      (the same process as (a); Python start-up not counted); median of --warm-runs.
  (d) `rlagent check RUN --offline --json` as a whole process on the warm run; median of 3.
The appends are written by this process, not the monitor, so they do not count in its RSS.
"""

from __future__ import annotations

import argparse
import json
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
from rlagent.tools.layout import discover_run
monitor = Monitor(discover_run(sys.argv[1]), home=Path(sys.argv[2]), offline=True)
for command in sys.stdin:
    started = time.perf_counter()
    state = monitor.check_in()
    elapsed = time.perf_counter() - started
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": elapsed, "bytes_read": state.out.observation.bytes_read,
                      "step": state.out.observation.trainer_step, "peak_rss_mb": rss_mb}), flush=True)
"""


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def log_files(run: Path) -> list[str]:
    return sorted(str(p) for p in (run / "logs" / "latest").resolve().rglob("*.log"))


def grep_seconds(run: Path, repeats: int = 3) -> tuple[float, int]:
    files = log_files(run)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        done = subprocess.run(["grep", "-cE", "WARNING|ERROR", *files], capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - started)
    hits = sum(int(line.rsplit(":", 1)[-1]) for line in done.stdout.split())
    return statistics.median(times), hits


def bench_size(size: int, out: Path, warm_runs: int) -> dict:
    run = out / f"big-h-{size >> 20}M"
    if not run.exists():
        write_big_h_run(run, size)
    subprocess.run(["cat", *log_files(run)], stdout=subprocess.DEVNULL, check=True)  # same page cache for all
    logs_bytes = sum(Path(f).stat().st_size for f in log_files(run))
    home = Path(tempfile.mkdtemp(prefix="rlagent-bench-"))
    grep_cold, hits = grep_seconds(run)
    monitor = subprocess.Popen(
        [sys.executable, "-c", MONITOR, str(run), str(home)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )

    def check_in() -> dict:
        monitor.stdin.write("check\n")
        monitor.stdin.flush()
        return json.loads(monitor.stdout.readline())

    cold = check_in()
    warm = []
    for _ in range(warm_runs):
        append_big_h_run(run, 1 << 20)
        warm.append(check_in())
    monitor.stdin.close()
    monitor.wait()
    whole = []
    for _ in range(3):
        append_big_h_run(run, 1 << 20)
        started = time.perf_counter()
        subprocess.run(
            [str(Path(sys.executable).with_name("rlagent")), "check", str(run), "--offline", "--json", "--home", str(home)],
            stdout=subprocess.DEVNULL,
            check=True,
        )
        whole.append(time.perf_counter() - started)
    grep_warm, _ = grep_seconds(run)
    shutil.rmtree(home)
    warm_s = statistics.median(w["seconds"] for w in warm)
    return {
        "logs_mb": logs_bytes / 1e6,
        "grep_s": grep_warm,
        "grep_hits": hits,
        "cold_s": cold["seconds"],
        "cold_rss_mb": cold["peak_rss_mb"],
        "warm_ms": warm_s * 1000,
        "warm_bytes": statistics.median(w["bytes_read"] for w in warm),
        "warm_rss_mb": warm[-1]["peak_rss_mb"],
        "whole_process_s": statistics.median(whole),
        "grep_over_warm": grep_warm / warm_s,
        "cold_over_grep": cold["seconds"] / grep_cold,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="250M,1G")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    parser.add_argument("--warm-runs", type=int, default=7)
    args = parser.parse_args()
    rows = {size: bench_size(parse_size(size), args.out, args.warm_runs) for size in args.sizes.split(",")}
    print(
        f"{'run':>6} {'logs MB':>8} {'(c) grep s':>10} {'(a) cold s':>10} {'cold/grep':>9} {'(b) warm ms':>11} "
        f"{'grep/warm':>9} {'(d) process s':>13} {'peak RSS MB':>11}"
    )
    for size, r in rows.items():
        print(
            f"{size:>6} {r['logs_mb']:>8.0f} {r['grep_s']:>10.3f} {r['cold_s']:>10.3f} {r['cold_over_grep']:>8.1f}x "
            f"{r['warm_ms']:>11.1f} {r['grep_over_warm']:>8.0f}x {r['whole_process_s']:>13.2f} {r['warm_rss_mb']:>11.0f}"
        )
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
