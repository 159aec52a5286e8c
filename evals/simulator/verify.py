"""Check the simulator's scenarios against the real monitor: does `rlagent check` say what the
scenario expects (and nothing it forbids)?

    python -m rlagent.evals.simulator.verify [NAME ...] [--seeds 1,2,3] [--cli] [-v]

Each scenario is written for every seed into a temporary directory and checked the way
`rlagent check RUN --offline --json --no-write --home TMP` does it (in-process through the same
library calls, or with `--cli` by running that very command in a subprocess). The table
shows, per scenario and seed, what was missing and what was reported although forbidden; the
exit status is 1 when anything disagrees. It validates the simulator (its scenarios must be
realistic AND diagnosable) and surfaces rules that miss real signals.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .registry import SCENARIOS
from .scenario import Scenario
from .writer import write_run

if TYPE_CHECKING:
    from rlagent.agents.rules.thresholds import Thresholds


@dataclass
class Outcome:
    name: str
    seed: int
    health: str
    found: dict[str, str] = field(default_factory=dict)
    """id -> severity"""
    missing: list[str] = field(default_factory=list)
    forbidden: list[str] = field(default_factory=list)
    write_s: float = 0.0
    check_s: float = 0.0
    summaries: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.forbidden


def check_in_process(run: Path, home: Path, thresholds: Thresholds | None = None, log_timezone: str | None = None) -> dict:
    """What `rlagent check RUN --offline --json --no-write --home HOME` prints with default settings
    (or these thresholds and log zone), without a process. The settings of the CLI (a config
    file, `RLAGENT_*`) are the top layer's: `--cli` runs the command itself to include them."""
    from rlagent.agents.report import build_report
    from rlagent.graph.runner import Monitor
    from rlagent.tools.layout import discover_run

    monitor = Monitor(
        discover_run(run),
        home=home,
        offline=True,
        write=False,
        thresholds=thresholds,
        log_timezone=log_timezone,
    )
    try:
        return build_report(monitor.check_in())
    finally:
        monitor.close()


def check(run: Path, home: Path) -> dict:
    rlagent = Path(sys.executable).with_name("rlagent")
    cmd = [str(rlagent), "check", str(run), "--offline", "--json", "--no-write", "--home", str(home)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"rlagent check failed on {run}: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def verify(scenario: Scenario, root: Path, cli: bool = False) -> Outcome:
    run = root / f"{scenario.name}-{scenario.seed}"
    t0 = time.perf_counter()
    write_run(scenario, run, overwrite=True)
    t1 = time.perf_counter()
    report = (check if cli else check_in_process)(run, root / f"home-{scenario.name}-{scenario.seed}")
    t2 = time.perf_counter()
    found = {f["id"]: f["severity"] for f in report["findings"]}
    return Outcome(
        name=scenario.name,
        seed=scenario.seed,
        health=report["health"],
        found=found,
        missing=[i for i in scenario.expects if i not in found],
        forbidden=[i for i in found if i in scenario.forbids],
        write_s=t1 - t0,
        check_s=t2 - t1,
        summaries={f["id"]: f["summary"] for f in report["findings"]},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--verbose", "-v", action="store_true", help="print the summaries of unexpected findings")
    parser.add_argument("--cli", action="store_true", help="run the `rlagent check` command in a subprocess")
    args = parser.parse_args(argv)
    names = args.names or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    jobs = [SCENARIOS[n].variant(seed=s) for n in names for s in seeds]
    workers = args.jobs if args.cli else 1  # in-process checks share one interpreter
    with tempfile.TemporaryDirectory(prefix="rlagent-verify-") as tmp, ThreadPoolExecutor(workers) as pool:
        outcomes = list(pool.map(lambda sc: verify(sc, Path(tmp), args.cli), jobs))
    bad = 0
    for o in outcomes:
        sc = SCENARIOS[o.name]
        mark = "ok " if o.ok else "BAD"
        bad += not o.ok
        extra = [f"{i}({s[0]})" for i, s in o.found.items() if i not in sc.expects]
        print(
            f"{mark} {o.name:<26} seed {o.seed:<3} {o.health:<8} write {o.write_s:5.2f}s check {o.check_s:4.1f}s"
            f" expects {','.join(sc.expects) or '-'}"
            + (f" | missing {','.join(o.missing)}" if o.missing else "")
            + (f" | FORBIDDEN {','.join(o.forbidden)}" if o.forbidden else "")
            + (f" | also {','.join(extra)}" if extra else "")
        )
        if args.verbose and not o.ok:
            for i in o.forbidden:
                print(f"      {i}: {o.summaries[i]}")
    print(f"{len(outcomes) - bad}/{len(outcomes)} agree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
