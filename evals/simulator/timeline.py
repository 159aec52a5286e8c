"""When things happen: the schedule of an async prime-rl run, in seconds from the launch.

The orchestrator generates batch n while the trainer trains on batch n-1. It may run ahead of
the policy by one step (H `TARGET_LAG`), so it pauses until the trainer broadcasts
checkpoint n-2 whenever it is faster (hence the periodic, normal `Orchestrator paused` line).
The trainer waits for batch n when the orchestrator is slower (`time/wait_for_batch`).

Every step owns its events: an orchestrator step n happens in (ship[n-1], ship[n]], the
trainer step n ends at end[n] >= ship[n]. So after generating step n nothing earlier than
ship[n] can appear again, which lets the writer stream events in time order.

A resumed attempt starts its clock at its own launch and trains from `resume_step + 1`; the
steps before are filled with the start-up state. A hung step (NCCL, stall, a dead inference
server) simply takes `shapes.HUNG_S`: everything after it lies beyond the recording.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import shapes
from .dynamics import Dynamics
from .rng import stream
from .scenario import Scenario

PIPELINE_INTERVAL_S = 10.0
"""H `orchestrator.log.interval`: the `Train batch ...` pipeline view."""
VLLM_STATS_INTERVAL_S = 10.0
METRICS_POLL_INTERVAL_S = 5.0
FINISH_TAIL_S = 9.0


@dataclass(frozen=True, slots=True)
class EvalRun:
    env: str
    step: int
    start: float
    end: float
    policy: int


class Timeline:
    """Per-step times, computed lazily (a 1 GB run has thousands of steps)."""

    def __init__(self, scenario: Scenario, dynamics: Dynamics) -> None:
        self.sc = scenario
        self.dyn = dynamics
        boot = stream(scenario.seed, "boot")
        self.orch_start = 1.1 + 0.4 * boot.random()
        self.trainer_start = 1.4 + 0.4 * boot.random()
        self.env_ready = 6.0 + 4.0 * boot.random()
        u = boot.random()
        # the normal-but-alarming run waits longer for vLLM (more `not reached` warnings)
        self.inference_ready = (95.0 + 30.0 * u) if scenario.profile == "alarming" else (42.0 + 22.0 * u)
        self.trainer_ready = 28.0 + 10.0 * boot.random()
        if scenario.resume_step is not None:
            self.trainer_ready += 6.0  # loading the checkpoint
        first = self.inference_ready + 1.5 + boot.random()
        # index n holds step n; index 0 (and every step a resumed attempt skips) is the start-up state
        before = scenario.first_step
        self.gen_start: list[float] = [first] * before
        self.ship: list[float] = [first] * before
        self.train_start: list[float] = [self.trainer_ready] * before
        self.end: list[float] = [self.trainer_ready] * before
        self.broadcast: list[float] = [0.0] * before
        self.wait_for_batch: list[float] = [0.0] * before
        self.wait_for_policy: list[float] = [0.0] * before
        self.save_ckpt: list[float] = [0.0] * before

    def ensure(self, n: int) -> None:
        while len(self.ship) <= n:
            self._next()

    def _next(self) -> None:
        k = len(self.ship)
        st = self.dyn.at(k)
        r = stream(self.sc.seed, "time", k)
        gate = self.broadcast[k - 2] if k >= 3 else 0.0
        gen_start = max(self.ship[k - 1], gate)
        ship = gen_start + st.gen_s + shapes.generation_hang_s(self.sc, k)
        ready = ship + 0.3 + 0.2 * r.random()
        train_start = max(self.end[k - 1], ready)
        # the final step is saved once after the loop (prime-rl skips the in-loop save there)
        save = (2.0 + 1.5 * r.random()) if k % self.sc.ckpt_interval == 0 and k < self.sc.max_steps else 0.0
        end = train_start + st.train_compute_s + save + shapes.hang_s(self.sc, k)
        self.gen_start.append(gen_start)
        self.ship.append(ship)
        self.train_start.append(train_start)
        self.end.append(end)
        self.broadcast.append(end + 0.8 + 0.6 * r.random())
        self.wait_for_batch.append(max(0.0, ready - self.end[k - 1]))
        self.wait_for_policy.append(gen_start - self.ship[k - 1])
        self.save_ckpt.append(save)

    # ---- derived ---------------------------------------------------------------------

    def trainer_step_time(self, n: int) -> float:
        self.ensure(n)
        return self.end[n] - self.end[n - 1]

    def orch_step_time(self, n: int) -> float:
        self.ensure(n)
        return self.ship[n] - self.ship[n - 1]

    def policy_at(self, t: float) -> int:
        """The newest policy version the inference server has at time t."""
        n = 0
        while True:
            self.ensure(n + 1)
            if self.broadcast[n + 1] + 0.5 > t:
                return n
            n += 1

    def evals(self, n: int) -> list[EvalRun]:
        sc = self.sc
        if not sc.eval_env_names or sc.eval_interval <= 0 or n % sc.eval_interval:
            return []
        self.ensure(n + 1)
        runs = []
        for env in sc.eval_env_names:
            r = stream(sc.seed, "evaltime", n, env)
            start = self.ship[n] + 0.2
            dur = min(self.dyn.at(n + 1).gen_s * (0.45 + 0.3 * r.random()), self.ship[n + 1] - start - 0.5)
            runs.append(EvalRun(env=env, step=n, start=start, end=start + max(dur, 1.0), policy=self.policy_at(start)))
        return runs

    def crash_time(self) -> float:
        """When the failing process dies (or, for a stall, when the trainer hangs)."""
        sc = self.sc
        n = sc.onset_step
        self.ensure(n)
        st = self.dyn.at(n)
        if sc.kind == "crash-oom":
            return self.train_start[n] + 0.55 * st.train_compute_s
        if sc.kind == "host-oom":
            return self.train_start[n] + 0.6 * st.train_compute_s
        if sc.kind == "crash-nccl":
            return self.hang_start() + shapes.NCCL_TIMEOUT_S + 0.012
        if sc.kind == "crash-python":
            return self.gen_start[n] + 0.4 * st.gen_s
        if sc.kind == "inference-unreachable":
            return self.inference_down() + shapes.INFERENCE_ABORT_S + 0.9
        return self.hang_start()

    def hang_start(self) -> float:
        """When the trainer enters the collective (or call) that never returns."""
        n = self.sc.onset_step
        self.ensure(n)
        return self.train_start[n] + 0.35 * self.dyn.at(n).train_compute_s

    def inference_down(self) -> float:
        """When the vLLM engine dies (inference-unreachable)."""
        n = self.sc.onset_step
        self.ensure(n)
        return self.gen_start[n] + 0.3 * self.dyn.at(n).gen_s

    def stall_s(self) -> float:
        """How long a stall has lasted when the recording ends: well past the 10 min rule."""
        return (15.0 + 12.0 * self.sc.severity) * 60.0

    def cut_time(self, last_step: int | None = None) -> float:
        """The moment the recorded snapshot ends."""
        sc = self.sc
        if sc.hangs and last_step is None:
            return self.hang_start() + self.stall_s()
        if sc.crashes and last_step is None:
            return self.crash_time() + 3.5
        last = sc.steps if last_step is None else last_step
        self.ensure(last)
        if sc.finished and last == sc.max_steps:
            return self.end[last] + FINISH_TAIL_S
        return self.end[last] + 0.8

    def last_event_time(self, n: int) -> float:
        """Upper bound on the time of anything step n writes."""
        self.ensure(n + 1)
        tail = max((e.end for e in self.evals(n)), default=0.0)
        return max(self.broadcast[n] + 1.0, tail + 1.0)


def ticks(start: float, end: float, origin: float, interval: float) -> list[float]:
    """Times origin + k*interval in (start, end]."""
    first = math.floor((start - origin) / interval) + 1
    out = []
    t = origin + first * interval
    while t <= end:
        if t > start:
            out.append(t)
        t += interval
    return out
