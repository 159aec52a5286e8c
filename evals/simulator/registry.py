"""The named scenarios: healthy runs of several shapes, and one run per diagnosable failure.

Each failure scenario is long enough past its onset for the rules to see a sustained signal
(`expectations.py` says how long); every parameter can be changed (`Scenario.variant`, or the
`rlagent simulate` flags), and the failure then moves with the onset, severity and seed.
"""

from __future__ import annotations

from datetime import UTC, datetime

from .scenario import Scenario

H_START = datetime(2026, 8, 24, 14, 2, 0, tzinfo=UTC)
L_START = datetime(2026, 5, 21, 9, 15, 0, tzinfo=UTC)


def _h(name: str, description: str, **fields: object) -> Scenario:
    return Scenario(name=name, description=description, layout="H", start=H_START, **{"max_steps": 200, **fields})


def _l(name: str, description: str, **fields: object) -> Scenario:
    return Scenario(name=name, description=description, layout="L", start=L_START, **{"max_steps": 200, **fields})


_TWO_ENVS = ["reverse-text", "alphabet-sort"]

_ALL = (
    # ---- healthy runs ----------------------------------------------------------------------
    _h("healthy-h", "healthy run, reward rising and entropy slowly falling", seed=1, steps=60),
    _l("healthy-l", "healthy run in the May 2026 layout", seed=2, steps=60),
    _h("healthy-multienv-h", "healthy run on two train envs (per-env sub-lines and metrics)", seed=3, steps=40, envs=_TWO_ENVS),
    _l("healthy-multienv-l", "healthy two-env run in the May 2026 layout", seed=13, steps=40, envs=_TWO_ENVS),
    _h("finished-h", "healthy run that reached max_steps and shut down cleanly", seed=4, steps=50, max_steps=50, finished=True),
    _l("finished-l", "finished run in the May 2026 layout", seed=14, steps=40, max_steps=40, finished=True),
    _h("fast-learner-h", "healthy: reward climbs within ~10 steps and stays high", seed=15, steps=60, profile="fast"),
    _l("slow-learner-l", "healthy: reward climbs slowly all run long", seed=16, steps=80, profile="slow"),
    _h(
        "plateau-h",
        "healthy: reward saturates early and holds (reward_flat is only a note)",
        seed=17,
        steps=70,
        profile="plateau",
    ),
    _h("noisy-h", "healthy: noisy reward, entropy and grad norm around sound trends", seed=18, steps=60, profile="noisy"),
    _h(
        "alarming-normal-h",
        "healthy, with every normal thing that looks alarming (findings.md), stronger than usual",
        seed=19,
        steps=60,
        profile="alarming",
    ),
    _l("alarming-normal-l", "the normal-but-alarming run in the May 2026 layout", seed=20, steps=60, profile="alarming"),
    # ---- stability ---------------------------------------------------------------------------
    _h(
        "entropy-collapse-h",
        "entropy collapses: identical answers, no trainable groups",
        seed=5,
        steps=60,
        kind="entropy-collapse",
        onset_step=25,
    ),
    _h(
        "entropy-explosion-h",
        "entropy climbs without bound: answers turn into word salad",
        seed=21,
        steps=50,
        kind="entropy-explosion",
        onset_step=25,
    ),
    _h("nan-h", "NaN loss and grad norm, then a broken policy", seed=6, steps=40, kind="nan", onset_step=28),
    _h(
        "grad-spike-h",
        "grad norm 15-25x its median for several steps in a row",
        seed=22,
        steps=40,
        kind="grad-spike",
        onset_step=28,
    ),
    _h(
        "mismatch-kl-h", "trainer/inference mismatch KL grows exponentially", seed=23, steps=50, kind="mismatch-kl", onset_step=30
    ),
    _h(
        "kl-blowup-h",
        "KL to the reference model blows past 10 (ref_kl in metrics.jsonl)",
        seed=24,
        steps=50,
        kind="kl-blowup",
        onset_step=30,
    ),
    # ---- health: crashes, hangs, infrastructure ------------------------------------------------
    _h(
        "crash-oom-h",
        "trainer dies of CUDA OOM in loss.backward(); torchrun ChildFailedError",
        seed=7,
        steps=40,
        kind="crash-oom",
        onset_step=23,
    ),
    _h(
        "crash-nccl-h",
        "NCCL watchdog timeout after a hung collective (C++ lines, SIGABRT), then ChildFailedError",
        seed=25,
        steps=40,
        kind="crash-nccl",
        onset_step=18,
        trainer_gpus=2,
        inference_gpus=2,
    ),
    _h(
        "crash-python-h",
        "orchestrator dies of a Python exception (KeyError in scoring)",
        seed=26,
        steps=40,
        kind="crash-python",
        onset_step=21,
    ),
    _l(
        "crash-python-l",
        "orchestrator Python crash in the May 2026 layout",
        seed=27,
        steps=40,
        kind="crash-python",
        onset_step=17,
    ),
    _h(
        "host-oom-h",
        "SLURM job: the kernel OOM-kills the trainer (exit code -9 in job_<id>.log)",
        seed=28,
        steps=40,
        kind="host-oom",
        onset_step=26,
        slurm=True,
    ),
    _h(
        "inference-unreachable-h",
        "vLLM engine dies mid-run: 30 min of `not reached` warnings, then `Aborting`",
        seed=29,
        steps=40,
        kind="inference-unreachable",
        onset_step=19,
    ),
    _h(
        "stall-h",
        "trainer hangs at a step; the orchestrator keeps logging its pipeline",
        seed=30,
        steps=40,
        kind="stall",
        onset_step=24,
    ),
    _h(
        "checkpoint-failure-h",
        "trainer checkpoints stay incomplete (no .metadata, nothing logged) from the onset on",
        seed=31,
        steps=50,
        kind="checkpoint-failure",
        onset_step=25,
    ),
    _h("disk-low-h", "checkpoint disk fills up below 10 % free", seed=32, steps=45, kind="disk-low", onset_step=28),
    _l(
        "env-errors-l",
        "sandboxes die: re-scheduled and dropped groups (L), failed requests with tracebacks (H), past 5 %",
        seed=33,
        steps=40,
        kind="env-errors",
        onset_step=25,
    ),
    # ---- progress -------------------------------------------------------------------------------
    _l(
        "truncation-l",
        "completions run into max_completion_tokens: truncation climbs past 60 %",
        seed=8,
        steps=60,
        kind="truncation",
        onset_step=20,
        max_completion_tokens=1792,
        seq_len=2048,
        rollout_steps_kept=12,
    ),
    _h(
        "truncation-h",
        "truncation climbs past 60 % (H step lines and metrics)",
        seed=34,
        steps=50,
        kind="truncation",
        onset_step=25,
    ),
    _h(
        "zero-advantage-h",
        "task too easy: most groups all-correct, Trainable under 25 %",
        seed=35,
        steps=45,
        kind="zero-advantage",
        onset_step=28,
    ),
    _h(
        "reward-constant-h",
        "reward function broken: every rollout scores exactly 0",
        seed=36,
        steps=45,
        kind="reward-constant",
        onset_step=25,
    ),
    _h(
        "errored-rollouts-h",
        "rollouts time out: Error above 5 % of every batch",
        seed=37,
        steps=45,
        kind="errored-rollouts",
        onset_step=30,
    ),
    _h(
        "length-collapse-h",
        "completions suddenly shrink to a quarter of their length",
        seed=38,
        steps=40,
        kind="length-collapse",
        onset_step=28,
    ),
    _h("length-explosion-h", "completions grow to the length cap", seed=39, steps=50, kind="length-explosion", onset_step=30),
    _h(
        "reward-regression-h", "reward peaks, then falls back by half", seed=40, steps=60, kind="reward-regression", onset_step=30
    ),
    _h(
        "reward-flat-h",
        "reward stops improving early and stays flat (info)",
        seed=41,
        steps=80,
        kind="reward-flat",
        onset_step=12,
    ),
    _h(
        "eval-regression-h",
        "eval avg@k falls three evals in a row while train reward rises",
        seed=42,
        steps=60,
        kind="eval-regression",
        onset_step=25,
    ),
    _h(
        "empty-batches-h",
        "empty train batches (all episodes filtered) before more and more steps",
        seed=43,
        steps=40,
        kind="empty-batches",
        onset_step=30,
    ),
    # ---- performance ---------------------------------------------------------------------------
    _h(
        "orchestrator-bottleneck-h",
        "rollouts slow down 3x: the trainer waits for batches",
        seed=44,
        steps=45,
        kind="orchestrator-bottleneck",
        onset_step=30,
    ),
    _h(
        "trainer-bottleneck-h",
        "the trainer slows down 3x: the orchestrator waits for policies",
        seed=45,
        steps=45,
        kind="trainer-bottleneck",
        onset_step=30,
    ),
    _l(
        "step-time-regression-l",
        "the whole node slows down: every step takes 2x longer",
        seed=46,
        steps=45,
        kind="step-time-regression",
        onset_step=30,
    ),
    _h(
        "off-policy-drops-h",
        "more and more episodes cancelled past max_off_policy_steps",
        seed=47,
        steps=45,
        kind="off-policy-drops",
        onset_step=28,
    ),
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in _ALL}
