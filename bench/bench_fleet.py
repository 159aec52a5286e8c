"""Benchmark `rlagent watch` over fleets of simulated runs (10, 100, 300 by default).

    python bench/bench_fleet.py                         # fleets under bench/out/fleet/
    python bench/bench_fleet.py --sizes 100 --warm-rounds 5 --workers 4
    python bench/bench_fleet.py --sizes 10 --live       # also: a live crash among recorded runs

For each size N, the fleet is N recorded runs of mixed scenarios: two thirds prime-rl of both
layouts (healthy, crashed, NaN, truncation, entropy collapse, finished...), one third verl, TRL and
OpenRLHF, written by the simulator behind `rlagent simulate`. Then one `rlagent watch ROOT --offline --cadence 1s --report R.html`
process runs 1 cold round and --warm-rounds warm rounds (nothing new in the runs: the steady
state of a fleet between appends) and this script reads, from the process itself:
  - round wall time, cold (round 1: every run's first check-in) and warm (median of the rest),
  - peak RSS of the watcher process (VmHWM at exit),
  - the HTML report build time inside the watcher (the last round's `report in`), and
  - `rlagent report ROOT -o FILE` as a whole process (start-up included), and the file's size.

--live adds the crash-detection check: a live simulated run (`rlagent simulate crash-oom-h
--live`, real PRIME-RL::* processes) beside 10 recorded runs, watched live with --cadence 1m
(15 s while Degraded or Down); the figure is the time from the crash line in its trainer log to
the round that reported `run_crashed`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SCENARIOS = (
    "healthy-h",
    "healthy-l",
    "crash-oom-h",
    "nan-h",
    "truncation-l",
    "entropy-collapse-h",
    "noisy-h",
    "finished-h",
    "stall-h",
    "reward-regression-h",
    "alarming-normal-l",
    "errored-rollouts-h",
)
FRAMEWORK_SCENARIOS = (
    "verl-healthy",
    "verl-entropy-collapse",
    "verl-crash-oom",
    "trl-healthy",
    "trl-nan",
    "openrlhf-healthy",
)
"""A third of the fleet: SIMULATED verl, TRL and OpenRLHF runs (`rlagent simulate NAME DIR`)."""
MIXED = SCENARIOS + FRAMEWORK_SCENARIOS
# VmHWM, the watcher's own peak (Linux carries ru_maxrss over from the forking parent through exec).
PEAK = (
    "import atexit, sys\n"
    "def _peak():\n"
    "    with open('/proc/self/status') as f:\n"
    "        return next(line.split()[1] for line in f if line.startswith('VmHWM:'))\n"
    "atexit.register(lambda: sys.stderr.write(f'PEAK_RSS_KB {_peak()}\\n'))\n"
)
WATCH = PEAK + "sys.argv = ['rlagent', *sys.argv[1:]]\nfrom rlagent.cli import main\nmain()\n"
ROUND = re.compile(r"^round (\d+): (\d+) check-in\(s\) of (\d+) run\(s\) in ([\d.]+)s(.*)$", re.M)
REPORT_IN = re.compile(r"report in ([\d.]+)s")


def build_fleet(root: Path, n: int) -> float:
    """N recorded runs (kept between invocations); seconds it took."""
    import contextlib
    import io

    from rlagent.commands.simulate import _run
    from rlagent.evals.simulator import SCENARIOS as ALL

    started = time.perf_counter()
    for i in range(n):
        name = MIXED[i % len(MIXED)]
        run = root / f"group-{i // 25:02d}" / f"{i:03d}-{name}"
        if name in FRAMEWORK_SCENARIOS:
            if not run.is_dir():
                simulate = [sys.executable, "-m", "rlagent", "simulate", name, str(run), "--seed", str(1000 + i)]
                subprocess.run(simulate, check=True, capture_output=True)
            continue
        if (run / "configs").is_dir():
            continue
        overrides = {"layout": None, "seed": 1000 + i, "onset_step": None, "severity": None, "step_time_s": None, "steps": None}
        with contextlib.redirect_stdout(io.StringIO()):
            _run(
                ALL[name], run, overrides, resume_flags=(False, None, None), run_name=None, overwrite=False, live=False, speed=60
            )
    return time.perf_counter() - started


def measure(root: Path, n: int, warm_rounds: int, workers: int, home: Path, report: Path) -> dict:
    shutil.rmtree(home, ignore_errors=True)
    for status in root.rglob("STATUS.md"):
        status.unlink()
    env = {**os.environ, "RLAGENT_HOME": str(home)}
    argv = [
        sys.executable, "-c", WATCH, "watch", str(root), "--offline", "--cadence", "1s", "--max-rounds", str(1 + warm_rounds),
        "--workers", str(workers), "--report", str(report), "--llm", "off",
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"watch failed ({done.returncode}):\n{done.stderr[-2000:]}")
    rounds = [
        (int(a), int(b), int(c), float(d), float(m.group(1)) if (m := REPORT_IN.search(rest)) else None)
        for a, b, c, d, rest in ROUND.findall(done.stdout)
    ]
    peak = int(re.search(r"PEAK_RSS_KB (\d+)", done.stderr).group(1)) / 1024
    cold = rounds[0]
    # warm rounds that checked every run still watched (a small fleet's round can end before all
    # its runs are due again, and then the next round checks only some of them)
    warm = [r for r in rounds[1:] if r[1] == max(x[1] for x in rounds[1:])] if rounds[1:] else []
    started = time.perf_counter()
    rep = subprocess.run(
        [sys.executable, "-m", "rlagent", "report", str(root), "-o", str(report), "--offline"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    report_process = time.perf_counter() - started
    if rep.returncode != 0:
        raise SystemExit(f"report failed:\n{rep.stderr[-2000:]}")
    return {
        "runs": n,
        "cold_round_s": cold[3],
        "cold_checkins": cold[1],
        "warm_round_s": statistics.median(r[3] for r in warm) if warm else None,
        "warm_range": (min(r[3] for r in warm), max(r[3] for r in warm)) if warm else None,
        "warm_checkins": warm[-1][1] if warm else None,
        "peak_rss_mb": peak,
        "report_in_watch_s": rounds[-1][4],
        "report_process_s": report_process,
        "report_kb": report.stat().st_size / 1024,
        "watch_process_s": wall,
    }


def live_crash(base: Path) -> float | None:
    """Seconds from a live run's crash line to the watch round that reported it."""
    from rlagent.evals.simulator import SCENARIOS as ALL  # noqa: F401  (fail early if the simulator is missing)

    root = base / "live"
    shutil.rmtree(root, ignore_errors=True)
    build_fleet(root / "recorded", 10)
    home = base / "live-home"
    shutil.rmtree(home, ignore_errors=True)
    env = {**os.environ, "RLAGENT_HOME": str(home), "PYTHONUNBUFFERED": "1", "RLAGENT_WATCH__MIN_CADENCE": "15s"}
    sim = subprocess.Popen(
        [sys.executable, "-m", "rlagent", "simulate", "crash-oom-h", str(root / "live"), "--live", "--run.name", "r1",
         "--speed", "30"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    time.sleep(3)
    watch = subprocess.Popen(
        [sys.executable, "-m", "rlagent", "watch", str(root), "--cadence", "1m", "--approve", "never", "--llm", "off"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, start_new_session=True,
    )  # fmt: skip
    crash_seen_at = None
    reported_at = None
    trainer_log = root / "live" / "r1" / "logs" / "attempt_1" / "trainer.log"
    deadline = time.monotonic() + 600
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(watch.stdout.readline, "")), daemon=True).start()
    try:
        while time.monotonic() < deadline and reported_at is None:
            if crash_seen_at is None and trainer_log.exists() and "OutOfMemoryError" in trainer_log.read_text(errors="replace"):
                crash_seen_at = time.monotonic()
            if crash_seen_at is not None and any(re.search(r"  r1: Down step \d+/\d+ #\d+ · .*run_crashed", x) for x in lines):
                reported_at = time.monotonic()
            time.sleep(0.1)
    finally:
        for proc in (watch, sim):
            try:
                os.killpg(proc.pid, signal.SIGINT)
                proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)
    if crash_seen_at is None or reported_at is None:
        return None
    return reported_at - crash_seen_at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100,300")
    parser.add_argument("--warm-rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "fleet")
    parser.add_argument("--live", action="store_true", help="also time a live crash's detection")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        root = args.out / f"fleet-{n}"
        took = build_fleet(root, n)
        print(f"fleet of {n}: ready ({took:.1f}s to write what was missing)", flush=True)
        with tempfile.TemporaryDirectory(prefix="rlagent-bench-") as tmp:
            row = measure(root, n, args.warm_rounds, args.workers, Path(tmp) / "home", Path(tmp) / "fleet.html")
        rows.append(row)
        print(
            f"  {n} runs: cold round {row['cold_round_s']:.2f}s ({row['cold_checkins']} check-ins), "
            f"warm round {row['warm_round_s']:.2f}s (min {row['warm_range'][0]:.2f}, max {row['warm_range'][1]:.2f}; "
            f"{row['warm_checkins']} check-ins), peak RSS {row['peak_rss_mb']:.0f} MB, "
            f"report {row['report_in_watch_s']:.2f}s in watch / {row['report_process_s']:.2f}s as a process "
            f"({row['report_kb']:.0f} KB)",
            flush=True,
        )
    print()
    print(
        "| runs | cold round | warm round | check-ins per warm round | peak RSS | report (in watch) "
        "| `rlagent report` process | report size |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['runs']} | {r['cold_round_s']:.2f} s | {r['warm_round_s']:.2f} s | {r['warm_checkins']} | "
            f"{r['peak_rss_mb']:.0f} MB | {r['report_in_watch_s']:.2f} s | {r['report_process_s']:.2f} s "
            f"| {r['report_kb']:.0f} KB |"
        )
    if args.live:
        seconds = live_crash(args.out)
        print()
        print(
            f"live crash noticed {seconds:.1f}s after the trainer's OOM line (cadence 1m, 15s while Degraded/Down)"
            if seconds is not None
            else "live crash: not reported within 10 minutes"
        )


if __name__ == "__main__":
    main()
