"""Simulated prime-rl runs: realistic run directories (layout H or L) from a typed `Scenario`.

Used for the bundled example runs, test inputs and the 1 GB benchmark; later the basis of
`rlagent simulate`. Everything is deterministic for a scenario (seed included).

    from rlagent.evals.simulator import SCENARIOS, write_run
    write_run(SCENARIOS["nan-h"], "/tmp/nan-run")
"""

from .bigrun import append_big_h_run, big_h_scenario, write_big_h_run
from .scenario import SCENARIOS, Kind, Layout, Scenario
from .writer import append_run, write_run

__all__ = [
    "SCENARIOS",
    "Kind",
    "Layout",
    "Scenario",
    "append_big_h_run",
    "append_run",
    "big_h_scenario",
    "write_big_h_run",
    "write_run",
]
