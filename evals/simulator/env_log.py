"""Env server logs (H `envs/train/<env>.log`, L `envs/train/<env>/env_server.log`).

Loguru lines without the torchrun prefix. Each failed episode the orchestrator reports also
shows here as `request failed: ...`; about one in four carries loguru's traceback, the
"occasional traceback" a real run has.
"""

from __future__ import annotations

from .events import Event, Sim
from .orchestrator_log import failures
from .rng import stream
from .tracebacks import env_sandbox_frames, env_timeout_frames, render


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
    """One `request failed` per failed episode; a broken env server (env-errors) logs each as an
    ERROR with its traceback."""
    out = []
    broken = sim.sc.kind == "env-errors" and n >= sim.sc.onset_step
    for t, env, _gid, message in failures(sim, n):
        r = stream(sim.sc.seed, "envtb", n, round(t, 3))
        if broken:
            exc = render(env_sandbox_frames(sim.sc.seed), "RuntimeError", message.split(": ", 1)[1])
            out.append(sim.log(t - 0.004, f"env:{env}", "ERROR", f"request failed: {message}", exc))
            continue
        exc = render(env_timeout_frames(sim.sc.seed), "TimeoutError", "") if r.random() < 0.25 else ""
        out.append(sim.log(t - 0.004, f"env:{env}", "WARNING", f"request failed: {message}", exc))
    return out
