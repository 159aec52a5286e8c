"""The orchestrator's output: `orchestrator.log`, its metrics rows, and per-step warnings.

Per step n it writes, within (ship[n-1], ship[n]]: the normal `Orchestrator paused` line when it
had to wait for the trainer's broadcast, H's `Train batch ...` pipeline view every 10 s, one
`Trace failed in group` warning per failed episode (L: `Rollout failed: ...`), then the SUCCESS
step line and (H) its big metrics row; evals finish a little later with their own line and row.
"""

from __future__ import annotations

from .dynamics import StepStats
from .events import Event, Sim
from .metrics import dumps, eval_row, orchestrator_row
from .rng import hexid, stream
from .steplines import eval_line, orchestrator_step, pipeline
from .timeline import PIPELINE_INTERVAL_S, EvalRun, ticks

FAIL_MESSAGE = "TimeoutError: episode exceeded 600.0s"


def startup(sim: Sim) -> list[Event]:
    tl = sim.tl
    t = tl.orch_start
    out = [sim.log(t, "orchestrator", "INFO", "Starting orchestrator (algorithm: grpo)" if sim.h else "Starting orchestrator")]
    if sim.h:
        out.append(sim.log(t + 0.3, "orchestrator", "INFO", f"Logging metrics to {sim.run_dir}/metrics.jsonl"))
    ckpts = f"{sim.run_dir}/checkpoints" if sim.h else f"{sim.run_dir}/run_default/checkpoints"
    out.append(sim.log(t + 0.5, "orchestrator", "INFO", f"No checkpoints found in {ckpts}. Starting from scratch."))
    url = "http://localhost:8000/v1"
    waited = 10
    while t + waited < tl.inference_ready:
        out.append(
            sim.log(
                t + waited,
                "orchestrator",
                "WARNING",
                f"Inference server was not reached after {waited} seconds "
                f"(Error: ConnectError: All connection attempts failed) on {url}",
            )
        )
        waited += 10
    ready = "Policy inference pool ready" if sim.h else "Inference server is ready"
    out.append(sim.log(tl.inference_ready + 0.6, "orchestrator", "SUCCESS" if sim.h else "INFO", ready))
    return out


def _env_of(sim: Sim, st: StepStats, u: float) -> str:
    acc = 0.0
    for e in st.envs:
        acc += e.ratio
        if u <= acc:
            return e.name
    return st.envs[-1].name


def failures(sim: Sim, n: int) -> list[tuple[float, str, str]]:
    """(time, env, group id) of each failed episode of step n (shared with the env servers)."""
    tl = sim.tl
    st = sim.dyn.at(n)
    r = stream(sim.sc.seed, "fail", n)
    out = []
    for _ in range(st.failed):
        t = tl.gen_start[n] + (tl.ship[n] - tl.gen_start[n]) * (0.05 + 0.9 * r.random())
        out.append((t, _env_of(sim, st, r.random()), hexid(r, 8)))
    return sorted(out)


def _pipeline_events(sim: Sim, n: int, prev_evals: list[EvalRun]) -> list[Event]:
    sc, tl = sim.sc, sim.tl
    st = sim.dyn.at(n)
    a, g, b = tl.ship[n - 1], tl.gen_start[n], tl.ship[n]
    r = stream(sc.seed, "pipe", n)
    multi = len(sc.envs) > 1
    multi_eval = len(sc.eval_env_names) > 1
    out = []
    for t in ticks(a, b, tl.orch_start, PIPELINE_INTERVAL_S):
        if t < g:
            batch, buffered, inflight = 0, 0, r.randrange(0, sc.group_size)
        else:
            frac = (t - g) / (b - g)
            batch = int(frac * sc.batch_size) // sc.group_size * sc.group_size
            buffered = r.randrange(1, sc.group_size) if batch < sc.batch_size else 0
            inflight = max(0, sc.batch_size - r.randrange(0, sc.group_size * 2))
        evals, inflight_eval = [], 0
        eval_inflight_by_env: list[tuple[str, int]] = []
        for ev in prev_evals:
            if ev.start < t < ev.end:
                expected = sc.eval_examples * sc.eval_k
                done = int((t - ev.start) / (ev.end - ev.start) * expected)
                evals.append((ev.env, done, expected))
                running = min(expected - done, 64)
                inflight_eval += running
                eval_inflight_by_env.append((ev.env, running))
        train_by_env = [(e.name, round(batch * e.ratio)) for e in st.envs] if multi else []
        by_env: list[tuple[str, int]] = []
        if multi or multi_eval:
            by_env = [(e.name, round(inflight * e.ratio)) for e in st.envs]
            running = dict(eval_inflight_by_env)
            by_env += [(env, running.get(env, 0)) for env in sc.eval_env_names]
        msg = pipeline(batch, sc.batch_size, buffered, inflight, inflight_eval, train_by_env, by_env, evals)
        out.append(sim.log(t, "orchestrator", "INFO", msg))
    return out


def step(sim: Sim, n: int) -> list[Event]:
    sc, tl = sim.sc, sim.tl
    tl.ensure(n + 1)
    st = sim.dyn.at(n)
    a, b = tl.ship[n - 1], tl.ship[n]
    out: list[Event] = []
    wait = tl.wait_for_policy[n]
    if wait > 1.0 and n >= 3:
        ckpt = n - 2
        if sim.h:
            msg = f"Orchestrator paused: waiting for trainer to broadcast checkpoint {ckpt}. Training is progressing normally."
            out.append(sim.log(a + 0.02, "orchestrator", "INFO", msg))
        else:
            msg = (
                f"Orchestrator paused: waiting for trainer process to complete checkpoint {ckpt} "
                "(>1 step(s) ahead). Training is progressing normally."
            )
            out.append(sim.log(a + 0.02, "orchestrator", "INFO", msg))
            resumed = f"Orchestrator resumed: checkpoint {ckpt} ready (after {wait:.2f}s)"
            out.append(sim.log(tl.gen_start[n], "orchestrator", "INFO", resumed))
    if sim.h:
        out += _pipeline_events(sim, n, tl.evals(n - 1) if n > 1 else [])
    for t, env, gid in failures(sim, n):
        msg = f"Trace failed in group {gid} ({env}) — {FAIL_MESSAGE}" if sim.h else f"Rollout failed: {FAIL_MESSAGE}"
        out.append(sim.log(t, "orchestrator", "WARNING", msg))
    out.append(sim.log(b, "orchestrator", "SUCCESS", orchestrator_step(sim.layout, n, tl.orch_step_time(n), st)))
    save = 0.0
    if n % sc.ckpt_interval == 0 and n < sc.max_steps:
        out.append(sim.log(b + 0.01, "orchestrator", "INFO", f"Saving checkpoint at step {n}"))
        save = 0.004
    if sim.h:
        row = orchestrator_row(sc, st, tl.orch_step_time(n), wait, save, sim.dyn.cumulative(n))
        out.append(Event(b + 0.02, "metrics", dumps(n, round(sim.clock.epoch(b + 0.02), 6), row)))
    for ev in tl.evals(n):
        stats = sim.dyn.eval_at(n, ev.env)
        line = eval_line(sim.layout, n, ev.policy, ev.end - ev.start, stats, sc.eval_k)
        out.append(sim.log(ev.end, "orchestrator", "SUCCESS", line))
        if sim.h:
            epoch = round(sim.clock.epoch(ev.end + 0.003), 6)
            out.append(Event(ev.end + 0.003, "metrics", dumps(float(n), epoch, eval_row(stats, ev.policy, sc.eval_k))))
    return out


def finish(sim: Sim) -> list[Event]:
    end = sim.tl.end[sim.sc.max_steps]
    return [sim.log(end + 2.1, "orchestrator", "SUCCESS", "Orchestrator finished.")]
