"""Env server logs (H `envs/train/<env>.log`, L `envs/train/<env>/env_server.log` and
`env_worker_0.log`).

Loguru lines without the torchrun prefix. What they say about a failed episode depends on the
verifiers version. H (verifiers v1, `serve/server.py`) logs `request failed: {e}` with its
traceback only when the request itself raised (env-errors: the sandbox died); an error that
the episode recorded on its trace leaves the env server silent (the orchestrator reports it).
L (verifiers v0, `envs/environment.py`) has the worker log `Aborted rollout due to {repr}` as
an ERROR for every errored rollout.
"""

from __future__ import annotations

from .events import Event, Sim
from .orchestrator_log import error_repr, failures
from .tracebacks import env_sandbox_frames, render


def startup(sim: Sim) -> list[Event]:
    """H: verifiers v1 (`serve/server.py`, `serve/pool.py`); L: verifiers v0's `EnvServer` and
    `EnvWorker` (`serve/server/env_server.py`, `env_worker.py`)."""
    t = sim.tl.env_ready
    out = []
    for i, env in enumerate(sim.sc.envs):
        address = f"tcp://127.0.0.1:{5600 + i}"
        name = f"env:{env}"
        if not sim.h:
            init = f"Initializing ZMQEnvServer to serve {env} (env_args={{}}, extra_env_kwargs={{}}, num_workers=1)"
            out.append(sim.log(t + 0.1 * i, name, "INFO", init))
            worker = sim.log(t + 0.1 * i + 0.2, f"envw:{env}", "INFO", f"Initialized worker env_worker_0 on {address}")
            out.append(Event(worker.t, worker.stream, worker.text, name))
            continue
        out.append(sim.log(t + 0.1 * i, name, "INFO", f"EnvServer up: taskset={env} address={address}"))
        pool = f"EnvServerPool up: address={address} workers=4/4 multiplex=1 elastic=False"
        out.append(sim.log(t + 0.1 * i + 0.2, name, "INFO", pool))
    return out


def step(sim: Sim, n: int) -> list[Event]:
    out = []
    for f in failures(sim, n):
        if f.how == "empty":
            continue
        if sim.h:
            if f.how == "raised":
                exc = render(env_sandbox_frames(sim.sc.seed), f.error[0], f.error[1])
                out.append(sim.log(f.t - 0.004, f"env:{f.env}", "WARNING", f"request failed: {f.error[1]}", exc))
            continue
        event = sim.log(f.t - 0.004, f"envw:{f.env}", "ERROR", f"Aborted rollout due to {error_repr(f.error)}")
        out.append(Event(event.t, event.stream, event.text, f"env:{f.env}"))
    return out
