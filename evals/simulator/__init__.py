"""Simulated prime-rl runs: realistic run directories (layout H or L) from a typed `Scenario`.

A simulator for tests and demos, nothing more: it writes the files a prime-rl run leaves (and,
with `live`, writes them in real time from processes titled like prime-rl's), so the monitor can
be exercised without GPUs. Used for the bundled example runs, test inputs, the 1 GB benchmark
and `rlagent simulate`. Everything is deterministic for a scenario (seed included).

    from rlagent.evals.simulator import SCENARIOS, write_run
    write_run(SCENARIOS["nan-h"], "/tmp/nan-run")
"""

from .bigrun import append_big_h_run, big_h_scenario, write_big_h_run
from .registry import SCENARIOS
from .scenario import KINDS, Kind, Layout, Scenario
from .writer import append_run, resume_run, write_run

__all__ = [
    "KINDS",
    "SCENARIOS",
    "Kind",
    "Layout",
    "Scenario",
    "append_big_h_run",
    "append_run",
    "big_h_scenario",
    "resume_run",
    "write_big_h_run",
    "write_run",
]
