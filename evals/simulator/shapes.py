"""How each injected failure bends a run over time: small pure functions of (scenario, step).

`dynamics.py` (the numbers) and `timeline.py` (the times) ask these, so a failure's shape is
written once. Everything scales with `severity` and starts at `onset_step`; nothing is pinned
to a step. Failures that end a run (crashes, hangs) act in the first attempt only, so a resumed
run gets past them; slow trends (entropy, KL, reward) are functions of the step and go on.
"""

from __future__ import annotations

import math

from .expectations import EXPECTATIONS
from .scenario import Scenario

NCCL_TIMEOUT_S = 600.0
"""torch.distributed's default NCCL collective timeout (`Timeout(ms)=600000`)."""
INFERENCE_ABORT_S = 1800.0
"""How long the orchestrator waits for an unreachable inference server before `Aborting`."""
HUNG_S = 1e7
"""Duration of something that never finishes (a hung step): beyond any recording."""


def since(sc: Scenario, kind: str, n: int) -> int | None:
    """Steps since the onset of `kind` (0 at the onset), or None before it / for other kinds."""
    if sc.kind != kind or n < sc.onset_step:
        return None
    if EXPECTATIONS[kind].ends_run and sc.attempt > 1:
        return None
    return n - sc.onset_step


def ramp(d: int, tau: float) -> float:
    """0 -> 1 over about `tau` steps, already > 0 at the onset."""
    return 1.0 - math.exp(-(d + 1) / max(tau, 1e-3))


def steep(d: int, steps: float = 3.0) -> float:
    """Linear 0 -> 1 over `steps` steps (a slowdown that sets in within a few steps)."""
    return min(1.0, (d + 1) / steps)


def entropy_factor(sc: Scenario, n: int) -> float:
    d = since(sc, "entropy-explosion", n)
    return 1.0 if d is None else 1.0 + 0.13 * sc.severity * (d + 1)


def compute_factor(sc: Scenario, n: int) -> float:
    """Trainer compute slowdown (trainer bottleneck, a node slowing down)."""
    d = since(sc, "trainer-bottleneck", n)
    if d is not None:
        return 1.0 + 2.2 * sc.severity * steep(d)
    d = since(sc, "step-time-regression", n)
    if d is not None:
        return 1.0 + (0.5 + 0.8 * sc.severity) * steep(d)
    return 1.0


def generation_factor(sc: Scenario, n: int) -> float:
    """Rollout generation slowdown (slow envs or inference; a node slowing down)."""
    d = since(sc, "orchestrator-bottleneck", n)
    if d is not None:
        return 1.0 + 2.2 * sc.severity * steep(d)
    d = since(sc, "step-time-regression", n)
    if d is not None:
        return 1.0 + (0.5 + 0.8 * sc.severity) * steep(d)
    return 1.0


def grad_spike(sc: Scenario, n: int) -> bool:
    """A sustained spike: 2 + 2 x severity consecutive steps from the onset."""
    d = since(sc, "grad-spike", n)
    return d is not None and d < 2 + round(2 * sc.severity)


def mismatch_kl_factor(sc: Scenario, n: int) -> float:
    d = since(sc, "mismatch-kl", n)
    return 1.0 if d is None else min(300.0, math.exp(0.28 * sc.severity * (d + 1)))


def ref_kl(sc: Scenario, n: int) -> float | None:
    """Reference KL (logged only by runs with a KL term): grows slowly by design, then blows up."""
    if sc.kind != "kl-blowup":
        return None
    value = 0.002 * n**0.8
    d = since(sc, "kl-blowup", n)
    if d is not None:
        value *= min(5000.0, math.exp(0.5 * sc.severity * (d + 1)))
    return value


def disk_free_ratio(sc: Scenario, n: int, healthy: float) -> float:
    """The checkpoint disk fills up (another job writing there) to 5-10 % free."""
    d = since(sc, "disk-low", n)
    if d is None:
        return healthy
    target = max(0.01, 0.10 - 0.05 * sc.severity)
    return healthy - (healthy - target) * min(1.0, (d + 1) / (8 / sc.severity))


def checkpoint_fails(sc: Scenario, n: int) -> bool:
    """Trainer checkpoints stay incomplete (no `.metadata`) at every checkpoint step from the onset
    on; prime-rl logs no save error for it."""
    return since(sc, "checkpoint-failure", n) is not None


def hang_s(sc: Scenario, n: int) -> float:
    """Extra seconds the trainer spends inside step n (a collective that never returns)."""
    if not sc.ends_early or n != sc.onset_step:
        return 0.0
    if sc.kind == "crash-nccl":
        return NCCL_TIMEOUT_S + 30.0
    if sc.kind == "stall":
        return HUNG_S
    return 0.0


def generation_hang_s(sc: Scenario, n: int) -> float:
    """Extra seconds the orchestrator spends on step n (the inference server is gone)."""
    if sc.ends_early and sc.kind == "inference-unreachable" and n == sc.onset_step:
        return HUNG_S
    return 0.0
