"""Env server logs (H `envs/train/<env>.log`, L `envs/train/<env>/env_server.log`).

Loguru lines without the torchrun prefix. Each failed episode the orchestrator reports also
shows here as `request failed: ...`; about one in four carries loguru's traceback, the
"occasional traceback" a real run has.
"""

from __future__ import annotations

from .events import Event, Sim
from .orchestrator_log import FAIL_MESSAGE, failures
from .rng import stream
from .tracebacks import env_timeout_frames, render


def startup(sim: Sim) -> list[Event]:
    t = sim.tl.env_ready
    out = []
    for i, env in enumerate(sim.sc.envs):
        port = 5600 + i
        name = f"env:{env}"
        out.append(sim.log(t + 0.1 * i, name, "INFO", f"EnvServer up: taskset={env} address=tcp://127.0.0.1:{port}"))
        out.append(sim.log(t + 0.1 * i + 0.2, name, "INFO", f"EnvServerPool up: 1 server(s), 4 worker(s) for {env}"))
    return out


def step(sim: Sim, n: int) -> list[Event]:
    out = []
    for t, env, _gid in failures(sim, n):
        r = stream(sim.sc.seed, "envtb", n, round(t, 3))
        exc = render(env_timeout_frames(sim.sc.seed), "TimeoutError", "") if r.random() < 0.25 else ""
        out.append(sim.log(t - 0.004, f"env:{env}", "WARNING", f"request failed: {FAIL_MESSAGE}", exc))
    return out
