"""Benchmark `rlagent diagnose` on a 10 MB console log of each framework (issue 9: under 2 s).

    python bench/bench_diagnose.py                  # 10 MB per framework, median of 5
    python bench/bench_diagnose.py --size 10M --repeats 9

Each log is a SIMULATED healthy run (`rlagent simulate <framework>-healthy --steps N`) with as many
steps as make the size, written once under bench/out/. For each, in the same run of this script:
  wall  `rlagent diagnose LOG --json` as a whole process, Python start-up included (what a user waits);
  cpu   user + sys time of that process;
  rss   its peak resident memory;
  cat   `cat LOG > /dev/null` for scale.
Figures are medians of --repeats runs, interleaved; the load average is printed with each row.
rlagent's modules are byte-compiled first, as `pip install` does (an editable checkout under
PYTHONDONTWRITEBYTECODE would otherwise compile ~80 modules on every start, ~0.2 s).
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out" / "diagnose"
LOG_NAME = {"verl": "verl_demo.log", "trl": "train.log", "openrlhf": "train.log", "prime-rl": "logs/trainer.log"}
BYTES_PER_STEP = {"verl": 3000, "trl": 1150, "openrlhf": 2100}
"""Roughly, from 400-step runs: the first guess of how many steps make the size."""


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def make_log(framework: str, size: int) -> Path:
    run_dir = OUT / f"{framework}-{size}"
    log = run_dir / LOG_NAME[framework]
    if log.is_file() and log.stat().st_size >= size:
        return log
    steps = size // BYTES_PER_STEP[framework] + 10
    while True:
        simulate = [sys.executable, "-m", "rlagent", "simulate", f"{framework}-healthy", str(run_dir)]
        subprocess.run([*simulate, "--steps", str(steps), "--overwrite"], check=True, capture_output=True)
        if log.stat().st_size >= size:
            return log
        steps = int(steps * size / log.stat().st_size) + 10


def run_once(log: Path) -> tuple[float, float, float]:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlagent", "diagnose", str(log), "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1, 2):
        raise SystemExit(f"rlagent diagnose {log} failed: {proc.stderr.read().decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def cat_once(log: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="10M")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--frameworks", default="verl,trl,openrlhf")
    args = parser.parse_args()
    size = parse_size(args.size)
    import rlagent

    root = Path(rlagent.__file__).resolve().parents[1]
    for package in ("rlagent", "agents", "graph", "tools", "evals"):
        compileall.compile_dir(root / package, quiet=1, rx=re.compile(r"/(fixtures|real)/"))  # not the runs' own .py
    logs = {fw: make_log(fw, size) for fw in args.frameworks.split(",")}
    results: dict[str, list[tuple[float, float, float, float]]] = {fw: [] for fw in logs}
    for _ in range(args.repeats):
        for fw, log in logs.items():
            wall, cpu, rss = run_once(log)
            results[fw].append((wall, cpu, rss, cat_once(log)))
    print(f"{'framework':<10} {'log MB':>7} {'wall s':>7} {'cpu s':>6} {'rss MB':>7} {'cat s':>6}  load")
    for fw, rows in results.items():
        med = [statistics.median(column) for column in zip(*rows, strict=True)]
        mb = logs[fw].stat().st_size / (1 << 20)
        load = os.getloadavg()[0]
        print(f"{fw:<10} {mb:>7.1f} {med[0]:>7.2f} {med[1]:>6.2f} {med[2]:>7.0f} {med[3]:>6.3f}  {load:.2f}")


if __name__ == "__main__":
    main()
