"""The messages of prime-rl's step, eval and pipeline lines, per layout (formats doc section 2).

Only the message text: `logfmt` adds time, level and colour. Numbers use prime-rl's own format
specs, so a non-finite value prints as `nan` exactly where the real trainer prints it.
"""

from __future__ import annotations

from collections.abc import Sequence

from .dynamics import EvalStats, StepStats
from .logfmt import format_time


def trainer_step(layout: str, n: int, seconds: float, st: StepStats) -> str:
    if layout == "H":
        return (
            f"Step {n} | {format_time(seconds):>7} | Loss {st.loss:.4f} | Entropy {st.entropy:.4f}"
            f" | Mismatch KL {st.mismatch_kl:.4f} | Grad. Norm {st.grad_norm:.4f} | LR {st.lr:.2e}"
            f" | Throughput {st.throughput:.0f} tokens/s | MFU {st.mfu:.1f}% | Peak Mem. {st.peak_mem_gib:.1f} GiB"
        )
    return (
        f"Step {n} | Time: {seconds:.2f}s | Loss: {st.loss:.4f} | Entropy: {st.entropy:.4f}"
        f" | Mismatch KL: {st.mismatch_kl:.4f} | Grad. Norm: {st.grad_norm:.4f} | LR: {st.lr:.2e}"
        f" | Throughput: {st.throughput:.0f} tokens/s | MFU: {st.mfu:.1f}% | Peak Mem.: {st.peak_mem_gib:.1f} GiB"
    )


def orchestrator_step(layout: str, n: int, seconds: float, st: StepStats) -> str:
    if layout == "L":
        return (
            f"Step {n} | Time: {seconds:.2f}s | Reward: {st.reward:.4f}"
            f" | Seq. Length: {st.input_tokens + st.output_tokens:.1f} tokens/sample"
            f" | Max. Off-Policy Level: {st.off_policy_max}"
        )
    head = (
        f"Step {n} | {format_time(seconds):>7} | Reward {st.reward:.4f}"
        f" | Trainable {st.trainable}/{st.effective} ({st.trainable / st.effective:.1%})"
        f" | Turns {st.turns:.1f} | Branches {st.branches:.1f} | Max Off-Policy {st.off_policy_max}"
        f" | Error {st.error:.1%} | Cancelled {st.cancelled:.1%} | Truncation {st.truncation:.1%}"
    )
    if len(st.envs) <= 1:
        return head
    width = max(len(e.name) for e in st.envs)
    lines = [head]
    for e in sorted(st.envs, key=lambda e: e.name):
        lines.append(
            f"╰─ {e.name:<{width}} | Ratio {e.ratio:.1%} | Reward {e.reward:.4f} | Turns {e.turns:.1f}"
            f" | Branches {e.branches:.1f} | Max Off-Policy {e.off_policy_max} | Error {e.error:.1%}"
            f" | Cancelled {e.cancelled:.1%} | Truncation {e.truncation:.1%}"
        )
    return "\n\t\t ".join(lines)


def eval_line(layout: str, step: int, policy: int, seconds: float, ev: EvalStats, k: int) -> str:
    if layout == "H":
        return (
            f"Evaluated {ev.env} (Step {step}) | Policy v{policy} | {format_time(seconds):>7}"
            f" | Reward {ev.reward:.4f} | Turns {ev.turns:.1f} | Branches 1.0 | Error {ev.error:.1%}"
            f" | Truncation {ev.truncation:.1%}"
        )
    spread = ev.output_tokens * 0.35
    return (
        f"Evaluated {ev.env} in {seconds:.2f}s (Avg@{k}={ev.avg_at_k:.4f}, Pass@{k}={ev.pass_at_k:.4f},"
        f" Completion Length: {ev.output_tokens:.2f} (±{spread:.2f}, ∈[{ev.output_tokens * 0.2:.2f},"
        f" {ev.output_tokens * 2.1:.2f}]), Truncated: {ev.truncation * 100:.1f}%)"
    )


def pipeline(
    batch: int,
    target: int,
    buffered: int,
    inflight_train: int,
    inflight_eval: int,
    train_by_env: Sequence[tuple[str, int]] = (),
    inflight_by_env: Sequence[tuple[str, int]] = (),
    evals: Sequence[tuple[str, int, int]] = (),
) -> str:
    """H's periodic `Train batch b/target (pct) ...; N inflight episodes (...)` view.

    `train_by_env` / `inflight_by_env` are given only for multi-env runs; `evals` holds
    (env, done, expected) of running evals.
    """
    part = f"Train batch {batch}/{target} ({batch / target if target else 0.0:.1%})"
    if train_by_env:
        part += " (" + ", ".join(f"{name}={v}" for name, v in train_by_env) + ")"
    if buffered:
        part += f" (+{buffered} buffered)"
    for env, done, expected in evals:
        part += f" | {env} {done}/{expected} ({done / expected if expected else 0.0:.1%})"
    tail = f"{inflight_train + inflight_eval} inflight episodes (train={inflight_train}, eval={inflight_eval}"
    if inflight_by_env:
        tail += " | " + ", ".join(f"{name}={v}" for name, v in inflight_by_env)
    return part + "; " + tail + ")"
