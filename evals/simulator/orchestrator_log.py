"""The orchestrator's output: `orchestrator.log`, its metrics rows, and per-step warnings.

Per step n it writes, within (ship[n-1], ship[n]]: the normal `Orchestrator paused` line when it
had to wait for the trainer's broadcast, H's `Train batch ...` pipeline view every 10 s, one
warning per failed episode, then the SUCCESS step line and (H) its big metrics row; evals finish
a little later with their own line and row. Failures add their warnings here: empty batches
before a step, episodes cancelled or dropped as too stale, `Only k/n effective traces are
trainable`, and the two ways this process dies (a Python exception; giving up on an unreachable
inference server).

Every WARNING/ERROR text is one prime-rl prints (prime-rl-formats.md section 7; the L-only
ones read from prime-rl 7f7ce8a, `orchestrator/scheduler.py` and `orchestrator.py`):
- a failed episode. H (`dispatcher.py`): `Trace failed in group {gid} ({env}) — {Type}: {msg}`
  when the error is on the trace; `Episode task failed in group {gid} ({env}): {exc!r}` when the
  env server's request itself raised (the client re-raises it as `RuntimeError('{Type}: {msg}')`);
  `Empty trajectory in group {gid} ({env})` for a trace without a turn. L (`scheduler.py`):
  `Rollout error in group {gid} ({env}), re-scheduling ({c}/{n} complete): {error_chain_repr}`,
  `Empty trajectory in group {gid} ({env}), re-scheduling ({c}/{n} complete)`, and after
  `max_error_reschedule_attempts` (3) failed rounds of one group `Dropping group {gid} ({env})
  after 3 failed dispatch rounds ...`.
- empty batches. H: the sink's `No admitted train payload after {u} finalized units
  (consecutive zero-output batch equivalents: {w}/10)`, then `Step {n}: empty train batch after
  {k} finalized episodes (consecutive empty batches: {c}/10)`. L: `Attempt {i}/3 at step {n}
  filtered out all {k} rollouts - retrying batch generation`.
- stale episodes. H: `Cancelled {n} train episodes past max_off_policy_steps={k}. ...` (in
  flight) and `Dropped {n} queued traces past max_off_policy_steps={k}. ...` (finished, queued).
  L: `Cancelled {n} old rollout requests (will refill naturally). Consider increasing
  max_off_policy_steps to avoid this.`
"""

from __future__ import annotations

from typing import NamedTuple

from . import shapes
from .dynamics import StepStats
from .events import Event, Sim
from .metrics import dumps, eval_row, orchestrator_row
from .rng import hexid, stream
from .steplines import eval_line, orchestrator_step, pipeline
from .timeline import PIPELINE_INTERVAL_S, EvalRun, ticks
from .tracebacks import inference_abort_frames, render, scoring_keyerror_frames

FAIL_ERROR = ("TimeoutError", "episode exceeded 600.0s")
ENV_FAIL_ERROR = ("RuntimeError", "sandbox exited unexpectedly (exit code 137)")
CONNECTION_FAIL_ERROR = ("APIConnectionError", "Connection error.")
INFERENCE_URL = "http://localhost:8000/v1"
MAX_EMPTY_BATCHES = 10
"""H: `MAX_CONSECUTIVE_EMPTY_BATCHES` (and the sink's zero-output limit)."""
MAX_EMPTY_BATCH_ATTEMPTS = 3
"""L: `MAX_EMPTY_BATCH_ATTEMPTS`; the last attempt crashes the orchestrator."""
MAX_RESCHEDULE_ROUNDS = 3
"""L: `orchestrator.max_error_reschedule_attempts` (default 3)."""
EMPTY_EVERY = 5
"""In a broken env, one failure in this many is a trace without a single turn."""


class Failure(NamedTuple):
    """One failed episode (L: rollout), shared by the orchestrator and the env servers."""

    t: float
    env: str
    gid: str
    """Group id: 8 hex digits in H, L's integer counter."""
    error: tuple[str, str]
    """(exception type, message)."""
    how: str
    """`trace`: the error is on the returned trace; `raised`: the env server's request raised
    (H: `request failed` there, `Episode task failed` here); `empty`: a trace without a turn."""
    round: int = 1
    """L: the group's failed dispatch round (a third one drops the group)."""


def error_repr(error: tuple[str, str]) -> str:
    """`repr()` of the exception (verifiers' `error_chain_repr` of a one-link chain)."""
    return f"{error[0]}({error[1]!r})"


def _fail_error(sim: Sim) -> tuple[str, str]:
    return ENV_FAIL_ERROR if sim.sc.kind == "env-errors" else FAIL_ERROR


def env_broken(sim: Sim, n: int) -> bool:
    """env-errors past its onset: the env's sandboxes die and the requests raise."""
    return sim.sc.kind == "env-errors" and n >= sim.sc.onset_step


def startup(sim: Sim) -> list[Event]:
    tl = sim.tl
    t = tl.orch_start
    first = "Starting orchestrator (algorithm: grpo)" if sim.h else "Starting orchestrator (rl)"
    out = [sim.log(t, "orchestrator", "INFO", first)]
    if sim.h:
        out.append(
            sim.log(
                t + 0.3,
                "orchestrator",
                "INFO",
                f"Logging metrics to {sim.run_dir}/metrics.jsonl and episodes to {sim.run_dir}/rollouts",
            )
        )
    # a fresh run says nothing about checkpoints (`No checkpoints found` is a `--resume` finding none)
    if sim.sc.resume_step is not None:
        # L's orchestrator says `training` here too (orchestrator.py at 7f7ce8a)
        who = "orchestrator" if sim.h else "training"
        out.append(sim.log(t + 0.5, "orchestrator", "INFO", f"Resuming {who} from checkpoint step {sim.sc.resume_step}"))
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
    if sim.h:  # L logs its readiness at DEBUG only (`Inference pool is ready after ...`)
        out.append(sim.log(tl.inference_ready + 0.6, "orchestrator", "SUCCESS", "Policy inference pool ready"))
    return out


def _env_of(sim: Sim, st: StepStats, u: float) -> str:
    acc = 0.0
    for e in st.envs:
        acc += e.ratio
        if u <= acc:
            return e.name
    return st.envs[-1].name


def _group_id(sim: Sim, n: int, r) -> str:
    """H: a random 8-hex group id; L: the scheduler's counter (groups of earlier steps below)."""
    if sim.h:
        return hexid(r, 8)
    groups_per_step = max(1, sim.sc.batch_size // sim.sc.group_size)
    return str((n - 1) * groups_per_step * 2 + r.randrange(groups_per_step * 2))


def failures(sim: Sim, n: int) -> list[Failure]:
    """Each failed episode of step n (shared with the env servers), by time. A dead inference
    server fails every episode in flight; a broken env (L) fails the same group round after
    round until the scheduler drops it."""
    sc, tl = sim.sc, sim.tl
    st = sim.dyn.at(n)
    r = stream(sc.seed, "fail", n)
    error = _fail_error(sim)
    broken = env_broken(sim, n)
    out: list[Failure] = []
    span = min(tl.ship[n], sim.horizon) - tl.gen_start[n]
    for i in range(st.failed):
        t = tl.gen_start[n] + span * (0.05 + 0.9 * r.random())
        env, gid = _env_of(sim, st, r.random()), _group_id(sim, n, r)
        if not broken:
            out.append(Failure(t, env, gid, error, "trace"))
        elif i % EMPTY_EVERY == EMPTY_EVERY - 1:
            out.append(Failure(t, env, gid, error, "empty"))
        else:
            out.append(Failure(t, env, gid, error, "raised"))
    if broken and not sim.h:
        out = _rescheduled(sim, out, span / max(1, st.failed))
    if sc.kind == "inference-unreachable" and sc.ends_early and n == sc.onset_step:
        down = tl.inference_down()
        out = [f for f in out if f.t < down]
        for _ in range(sc.batch_size // 2):
            t, env, gid = down + 1.0 + 4.0 * r.random(), _env_of(sim, st, r.random()), _group_id(sim, n, r)
            out.append(Failure(t, env, gid, CONNECTION_FAIL_ERROR, "trace"))
    return sorted(out)


def _rescheduled(sim: Sim, fails: list[Failure], gap: float) -> list[Failure]:
    """L, broken env: a failed group is re-scheduled and fails again; every third failure of a
    group is its last round (the scheduler then drops it). The failures keep their count."""
    out = []
    for i, f in enumerate(fails):
        lead = fails[i - i % MAX_RESCHEDULE_ROUNDS]
        rnd = i % MAX_RESCHEDULE_ROUNDS + 1
        t = lead.t + (rnd - 1) * min(gap, 20.0) * 0.5 if rnd > 1 else f.t
        out.append(f._replace(t=t, env=lead.env, gid=lead.gid, round=rnd))
    return out


def failure_lines(sim: Sim, f: Failure) -> list[Event]:
    """The orchestrator's warnings for one failed episode (see the module docstring)."""
    kind, msg = f.error
    if sim.h:
        if f.how == "empty":
            return [sim.log(f.t, "orchestrator", "WARNING", f"Empty trajectory in group {f.gid} ({f.env})")]
        if f.how == "raised":
            wrapped = error_repr(("RuntimeError", f"{kind}: {msg}"))
            return [sim.log(f.t, "orchestrator", "WARNING", f"Episode task failed in group {f.gid} ({f.env}): {wrapped}")]
        return [sim.log(f.t, "orchestrator", "WARNING", f"Trace failed in group {f.gid} ({f.env}) — {kind}: {msg}")]
    n = sim.sc.group_size
    complete = stream(sim.sc.seed, "complete", f.gid, round(f.t, 3)).randrange(n)
    if f.how == "empty":
        line = f"Empty trajectory in group {f.gid} ({f.env}), re-scheduling ({complete}/{n} complete)"
        last = "empty trajectory"
    else:
        last = error_repr(f.error)
        line = f"Rollout error in group {f.gid} ({f.env}), re-scheduling ({complete}/{n} complete): {last}"
    out = [sim.log(f.t, "orchestrator", "WARNING", line)]
    if f.round >= MAX_RESCHEDULE_ROUNDS:
        drop = (
            f"Dropping group {f.gid} ({f.env}) after {f.round} failed dispatch rounds ({complete}/{n} complete). "
            f"Last failure: {last}. Set orchestrator.max_error_reschedule_attempts higher (or to None) "
            "to retry more aggressively."
        )
        out.append(sim.log(f.t + 0.001, "orchestrator", "WARNING", drop))
    return out


def _batch_warnings(sim: Sim, n: int, st: StepStats) -> list[Event]:
    """Empty batches cut before this step's, stale episodes cancelled, few trainable traces."""
    tl = sim.tl
    out = []
    g, b = tl.gen_start[n], tl.ship[n]
    r = stream(sim.sc.seed, "batchwarn", n)
    # L retries a filtered-out batch at most MAX_EMPTY_BATCH_ATTEMPTS - 1 times (then it crashes)
    empties = st.empty_batches if sim.h else min(st.empty_batches, MAX_EMPTY_BATCH_ATTEMPTS - 1)
    for c in range(1, empties + 1):
        t = g + (b - g) * c / (empties + 1)
        k = sim.sc.batch_size + r.randrange(sim.sc.group_size)
        if sim.h:
            units = f"No admitted train payload after {c * sim.sc.batch_size + r.randrange(sim.sc.group_size)} finalized units "
            units += f"(consecutive zero-output batch equivalents: {c}/{MAX_EMPTY_BATCHES})"
            out.append(sim.log(t - 0.05, "orchestrator", "WARNING", units))
            msg = f"Step {n}: empty train batch after {k} finalized episodes (consecutive empty batches: {c}/{MAX_EMPTY_BATCHES})"
        else:
            msg = f"Attempt {c}/{MAX_EMPTY_BATCH_ATTEMPTS} at step {n} filtered out all {k} rollouts - retrying batch generation"
        out.append(sim.log(t, "orchestrator", "WARNING", msg))
    if st.stale_cancelled:
        t = g + (b - g) * (0.1 + 0.3 * r.random())
        if not sim.h:
            msg = (
                f"Cancelled {st.stale_cancelled} old rollout requests (will refill naturally). "
                "Consider increasing max_off_policy_steps to avoid this."
            )
            out.append(sim.log(t, "orchestrator", "WARNING", msg))
        else:
            # in flight ones are cancelled at the new policy; finished ones waiting in the queue are dropped
            queued = st.stale_cancelled // 3
            cancelled = st.stale_cancelled - queued
            msg = f"Cancelled {cancelled} train episodes past max_off_policy_steps=8. Consider increasing it to avoid this."
            out.append(sim.log(t, "orchestrator", "WARNING", msg))
            if queued:
                msg = f"Dropped {queued} queued traces past max_off_policy_steps=8. Consider increasing it to avoid this."
                out.append(sim.log(t + 0.02, "orchestrator", "WARNING", msg))
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
    for f in failures(sim, n):
        out += failure_lines(sim, f)
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
