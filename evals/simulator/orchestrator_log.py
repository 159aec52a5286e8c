"""The orchestrator's output: `orchestrator.log`, its metrics rows, and per-step warnings.

Per step n it writes, within (ship[n-1], ship[n]]: the normal `Orchestrator paused` line when it
had to wait for the trainer's broadcast, H's `Train batch ...` pipeline view every 10 s, one
`Trace failed in group` warning per failed episode (L: `Rollout failed: ...`), then the SUCCESS
step line and (H) its big metrics row; evals finish a little later with their own line and row.
Failures add their warnings here: empty batches before a step, episodes cancelled as too stale,
`Only k/n effective traces are trainable`, and the two ways this process dies (a Python
exception; giving up on an unreachable inference server).
"""

from __future__ import annotations

from . import shapes
from .dynamics import StepStats
from .events import Event, Sim
from .metrics import dumps, eval_row, orchestrator_row
from .rng import hexid, stream
from .steplines import eval_line, orchestrator_step, pipeline
from .timeline import PIPELINE_INTERVAL_S, EvalRun, ticks
from .tracebacks import inference_abort_frames, render, scoring_keyerror_frames

FAIL_MESSAGE = "TimeoutError: episode exceeded 600.0s"
ENV_FAIL_MESSAGE = "RuntimeError: sandbox exited unexpectedly (exit code 137)"
CONNECTION_FAIL_MESSAGE = "APIConnectionError: Connection error."
INFERENCE_URL = "http://localhost:8000/v1"
MAX_EMPTY_BATCHES = 10


def fail_message(sim: Sim) -> str:
    return ENV_FAIL_MESSAGE if sim.sc.kind == "env-errors" else FAIL_MESSAGE


def startup(sim: Sim) -> list[Event]:
    tl = sim.tl
    t = tl.orch_start
    out = [sim.log(t, "orchestrator", "INFO", "Starting orchestrator (algorithm: grpo)" if sim.h else "Starting orchestrator")]
    if sim.h:
        out.append(sim.log(t + 0.3, "orchestrator", "INFO", f"Logging metrics to {sim.run_dir}/metrics.jsonl"))
    ckpts = f"{sim.run_dir}/checkpoints" if sim.h else f"{sim.run_dir}/run_default/checkpoints"
    if sim.sc.resume_step is None:
        out.append(sim.log(t + 0.5, "orchestrator", "INFO", f"No checkpoints found in {ckpts}. Starting from scratch."))
    else:
        out.append(sim.log(t + 0.5, "orchestrator", "INFO", f"Resuming orchestrator from checkpoint step {sim.sc.resume_step}"))
    url = INFERENCE_URL
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


def failures(sim: Sim, n: int) -> list[tuple[float, str, str, str]]:
    """(time, env, group id, message) of each failed episode of step n (shared with the env
    servers). A dead inference server fails every episode in flight."""
    sc, tl = sim.sc, sim.tl
    st = sim.dyn.at(n)
    r = stream(sc.seed, "fail", n)
    message = fail_message(sim)
    out = []
    span = min(tl.ship[n], sim.horizon) - tl.gen_start[n]
    for _ in range(st.failed):
        t = tl.gen_start[n] + span * (0.05 + 0.9 * r.random())
        out.append((t, _env_of(sim, st, r.random()), hexid(r, 8), message))
    if sc.kind == "inference-unreachable" and sc.ends_early and n == sc.onset_step:
        down = tl.inference_down()
        out = [f for f in out if f[0] < down]
        for _ in range(sc.batch_size // 2):
            gid = hexid(r, 8)
            out.append((down + 1.0 + 4.0 * r.random(), _env_of(sim, st, r.random()), gid, CONNECTION_FAIL_MESSAGE))
    return sorted(out)


def _batch_warnings(sim: Sim, n: int, st: StepStats) -> list[Event]:
    """Empty batches cut before this step's, stale episodes cancelled, few trainable traces."""
    tl = sim.tl
    out = []
    g, b = tl.gen_start[n], tl.ship[n]
    r = stream(sim.sc.seed, "batchwarn", n)
    for c in range(1, st.empty_batches + 1):
        t = g + (b - g) * c / (st.empty_batches + 1)
        k = sim.sc.batch_size + r.randrange(sim.sc.group_size)
        msg = f"Step {n}: empty train batch after {k} finalized episodes (consecutive empty batches: {c}/{MAX_EMPTY_BATCHES})"
        out.append(sim.log(t, "orchestrator", "WARNING", msg))
    if st.stale_cancelled:
        msg = f"Cancelled {st.stale_cancelled} train episodes past max_off_policy_steps=8. Consider increasing it to avoid this."
        out.append(sim.log(g + (b - g) * (0.1 + 0.3 * r.random()), "orchestrator", "WARNING", msg))
    if sim.h and st.effective and st.trainable / st.effective <= 0.1:
        msg = (
            f"Only {st.trainable}/{st.effective} effective traces are trainable "
            f"({st.trainable / st.effective:.1%}) — consider reviewing task difficulty"
        )
        out.append(sim.log(b - 0.01, "orchestrator", "WARNING", msg))
    return out


def _unreachable(sim: Sim) -> list[Event]:
    """vLLM died: the orchestrator warns every 10 s until it gives up after 1800 s."""
    tl = sim.tl
    down = tl.inference_down()
    out = []
    waited = 10
    while waited < shapes.INFERENCE_ABORT_S:
        msg = f"Inference server was not reached after {waited} seconds (Error: ConnectTimeout: timed out) on {INFERENCE_URL}"
        out.append(sim.log(down + waited + 0.3, "orchestrator", "WARNING", msg))
        waited += 10
    return out


def crash(sim: Sim) -> list[Event]:
    """This process dies: a KeyError in scoring, or the end of the wait for inference."""
    sc = sim.sc
    c = sim.tl.crash_time()
    if sc.kind == "inference-unreachable":
        abort = f"Inference server is not ready after {shapes.INFERENCE_ABORT_S:.0f} seconds. Aborting..."
        exc = render(inference_abort_frames(sc.seed), "TimeoutError", abort.removesuffix(". Aborting..."))
        return [
            sim.log(c - 0.01, "orchestrator", "ERROR", abort),
            sim.log(c, "orchestrator", "ERROR", "Fatal error in run_orchestrator", exc),
        ]
    exc = render(scoring_keyerror_frames(sc.seed), "KeyError", "'answer'")
    return [sim.log(c, "orchestrator", "ERROR", "Fatal error in run_orchestrator", exc)]


def _pipeline_events(sim: Sim, n: int, prev_evals: list[EvalRun]) -> list[Event]:
    sc, tl = sim.sc, sim.tl
    st = sim.dyn.at(n)
    a, g, b = tl.ship[n - 1], tl.gen_start[n], tl.ship[n]
    r = stream(sc.seed, "pipe", n)
    multi = len(sc.envs) > 1
    multi_eval = len(sc.eval_env_names) > 1
    out = []
    for t in ticks(a, min(b, sim.horizon), tl.orch_start, PIPELINE_INTERVAL_S):
        if t < g:
            batch, buffered, inflight = 0, 0, r.randrange(0, sc.group_size)
        else:
            frac = min(1.0, (t - g) / (b - g)) if b < shapes.HUNG_S else 0.4
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
    for t, env, gid, message in failures(sim, n):
        msg = f"Trace failed in group {gid} ({env}) — {message}" if sim.h else f"Rollout failed: {message}"
        out.append(sim.log(t, "orchestrator", "WARNING", msg))
    out += _batch_warnings(sim, n, st)
    if sc.kind == "inference-unreachable" and sc.ends_early and n == sc.onset_step:
        out += _unreachable(sim)
    out.append(sim.log(b, "orchestrator", "SUCCESS", orchestrator_step(sim.layout, n, tl.orch_step_time(n), st)))
    save = 0.0
    if n % sc.ckpt_interval == 0 and n < sc.max_steps:
        out.append(sim.log(b + 0.01, "orchestrator", "INFO", f"Saving checkpoint at step {n}"))
        save = 0.004
    if sim.h:
        row = orchestrator_row(sc, st, tl.orch_step_time(n), wait, save, sim.dyn.cumulative(n))
        out.append(Event(b + 0.02, "metrics", dumps(n, round(sim.clock.epoch(b + 0.02), 6), row), "orchestrator"))
    for ev in tl.evals(n):
        stats = sim.dyn.eval_at(n, ev.env)
        line = eval_line(sim.layout, n, ev.policy, ev.end - ev.start, stats, sc.eval_k)
        out.append(sim.log(ev.end, "orchestrator", "SUCCESS", line))
        if sim.h:
            epoch = round(sim.clock.epoch(ev.end + 0.003), 6)
            out.append(
                Event(ev.end + 0.003, "metrics", dumps(float(n), epoch, eval_row(stats, ev.policy, sc.eval_k)), "orchestrator")
            )
    return out


def finish(sim: Sim) -> list[Event]:
    end = sim.tl.end[sim.sc.max_steps]
    return [sim.log(end + 2.1, "orchestrator", "SUCCESS", "Orchestrator finished.")]
