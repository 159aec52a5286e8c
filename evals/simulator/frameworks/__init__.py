"""SIMULATED verl, TRL and OpenRLHF runs, in those frameworks' exact formats (shared/reference/frameworks.md):
for tests, demos and evals only, never mistaken for a real run (files and titles say SIMULATED).

A `FrameworkScenario` (framework, console style, shape, at most one failure) gives a `Plan` per launch:
what every process of the framework writes, when (`verl.py`, `trl.py`, `openrlhf.py`). `writer.py` writes a
plan to disk with simulated mtimes (and, for fixtures, when each file grew); `live.py` runs it in real time
from processes titled as the framework's are; `launch.py` resolves a `rlagent simulate` command line,
fresh or resumed with the framework's own resume flag. The metric curves are the prime-rl simulator's
(`numbers.py` maps onto evals/simulator/dynamics.py). Named scenarios: `registry.FRAMEWORK_SCENARIOS`.

    from rlagent.evals.simulator.frameworks import FRAMEWORK_SCENARIOS, write_framework_run
    write_framework_run(FRAMEWORK_SCENARIOS["verl-entropy-collapse"], "/tmp/verl-run")
"""

from .registry import FRAMEWORK_SCENARIOS
from .scenario import KINDS, STYLES, FrameworkScenario
from .writer import FrameworkLaunchError, plan_for, resume_point, write_framework_run

__all__ = [
    "FRAMEWORK_SCENARIOS",
    "KINDS",
    "STYLES",
    "FrameworkLaunchError",
    "FrameworkScenario",
    "plan_for",
    "resume_point",
    "write_framework_run",
]
