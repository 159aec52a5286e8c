"""The named SIMULATED verl, TRL and OpenRLHF scenarios: healthy runs (one normal-but-alarming each) and
every failure each framework can show, with its real signatures.

`rlagent simulate --list` shows them after the prime-rl ones; `rlagent simulate verl-entropy-collapse DIR`
writes one. Every parameter can be changed (`FrameworkScenario.variant`, or the command's flags).
"""

from __future__ import annotations

from datetime import UTC, datetime

from .scenario import FrameworkScenario

START = {
    "verl": datetime(2026, 8, 24, 14, 2, 0, tzinfo=UTC),
    "trl": datetime(2026, 8, 25, 9, 30, 0, tzinfo=UTC),
    "openrlhf": datetime(2026, 8, 26, 19, 24, 0, tzinfo=UTC),
}


def _v(name: str, description: str, **fields: object) -> FrameworkScenario:
    return FrameworkScenario(
        name=name,
        description=description,
        framework="verl",
        start=START["verl"],
        **{"style": "v0.7-numpy2", "n_gpus": 4, **fields},
    )


def _t(name: str, description: str, **fields: object) -> FrameworkScenario:
    return FrameworkScenario(
        name=name, description=description, framework="trl", start=START["trl"], **{"style": "tf4", **fields}
    )


def _o(name: str, description: str, **fields: object) -> FrameworkScenario:
    return FrameworkScenario(
        name=name, description=description, framework="openrlhf", start=START["openrlhf"], **{"style": "v0.11", **fields}
    )


_ALL = (
    # ---- verl -------------------------------------------------------------------------------------
    _v("verl-healthy", "verl 0.7 (numpy 2 reprs): healthy GRPO run, step:0 validation, KL loss", seed=101, steps=40, use_kl=True),
    _v(
        "verl-healthy-v04",
        "verl 0.4 (3-decimal console), tqdm glued by \\r, no ANSI: a healthy run that reaches total_training_steps",
        seed=102,
        style="v0.4",
        steps=30,
        max_steps=30,
        finished=True,
        ansi=False,
        glued_tqdm=True,
    ),
    _v(
        "verl-alarming-normal",
        "verl 0.5 (plain reprs): healthy, with vLLM/FSDP warnings, [repeated Nx across cluster], a grad-norm blip",
        seed=103,
        style="v0.5-numpy1",
        steps=40,
        profile="alarming",
    ),
    _v("verl-entropy-collapse", "actor/entropy collapses from step 20", seed=104, steps=45, kind="entropy-collapse"),
    _v(
        "verl-clip-ratio-high",
        "response_length/clip_ratio climbs past 60 % from step 15 (verl 0.5 console)",
        seed=105,
        style="v0.5-numpy1",
        steps=40,
        kind="truncation",
        onset_step=15,
    ),
    _v("verl-nan", "actor/pg_loss and grad_norm turn np.float64(nan) at step 22", seed=106, steps=32, kind="nan", onset_step=22),
    _v("verl-kl-blowup", "actor/kl_loss blows past 10 from step 20", seed=107, steps=40, kind="kl-blowup", use_kl=True),
    _v(
        "verl-reward-constant",
        "the reward manager scores every completion 0 from step 18 (critic/score max = min = 0)",
        seed=116,
        steps=40,
        kind="reward-constant",
        onset_step=18,
    ),
    _v(
        "verl-degenerate-output",
        "rollout dumps fill with `!!!!` completions up to the length cap from step 20",
        seed=108,
        steps=32,
        kind="degenerate-output",
    ),
    _v(
        "verl-reward-hacking",
        "critic/score rises while val-core acc falls and responses shrink (lenient reward exploited) from step 18",
        seed=109,
        steps=45,
        kind="reward-hacking",
        onset_step=18,
    ),
    _v(
        "verl-crash-oom",
        "RayTaskError(OutOfMemoryError) in WorkerDict.actor_rollout_update_actor (CUDA OOM) at step 23, Hydra exit",
        seed=110,
        steps=40,
        kind="crash-oom",
        onset_step=23,
    ),
    _v(
        "verl-actor-died",
        "a WorkerDict is SIGKILLed at step 17: ActorDiedError through RayTaskError, Hydra exit",
        seed=111,
        style="v0.5-numpy1",
        steps=40,
        kind="actor-died",
        onset_step=17,
    ),
    _v(
        "verl-hydra-error",
        "the run dies before its first step: `Error executing job with overrides` (train parquet not found)",
        seed=112,
        steps=10,
        kind="hydra-error",
        onset_step=1,
    ),
    _v(
        "verl-engine-dead",
        "the vLLM engine dies in an agent-loop rollout at step 15: RayTaskError(EngineDeadError)",
        seed=113,
        steps=40,
        kind="engine-dead",
        onset_step=15,
    ),
    _v(
        "verl-reward-fn-error",
        "the user's compute_score raises ValueError at step 12 (reward manager traceback)",
        seed=114,
        steps=40,
        kind="reward-fn-error",
        onset_step=12,
    ),
    _v(
        "verl-host-oom",
        "Ray's memory monitor kills a rollout worker at step 19 (ray.exceptions.OutOfMemoryError)",
        seed=115,
        steps=40,
        kind="host-oom",
        onset_step=19,
    ),
    # ---- TRL ---------------------------------------------------------------------------------------
    _t("trl-healthy", "TRL GRPO under transformers 4.x (raw floats): healthy, open-r1 style rewards", seed=201, steps=40),
    _t(
        "trl-healthy-tf5",
        "transformers 5.x (`.4g` strings), logging_steps 2: a healthy run that reaches max_steps",
        seed=202,
        style="tf5",
        steps=40,
        max_steps=40,
        logging_steps=2,
        finished=True,
    ),
    _t(
        "trl-alarming-normal",
        "healthy, with `loss = 0` at the first steps, `kl = nan` with beta 0 and torch/NCCL start-up warnings",
        seed=203,
        steps=40,
        profile="alarming",
    ),
    _t(
        "trl-entropy-collapse",
        "entropy collapses from step 20 (transformers 5.x)",
        seed=204,
        style="tf5",
        steps=45,
        kind="entropy-collapse",
    ),
    _t(
        "trl-truncation",
        "completions/clipped_ratio climbs past 60 % from step 15",
        seed=205,
        steps=40,
        kind="truncation",
        onset_step=15,
    ),
    _t(
        "trl-nan",
        "loss and grad_norm print bare nan from step 22 (transformers 4.x)",
        seed=206,
        steps=32,
        kind="nan",
        onset_step=22,
    ),
    _t(
        "trl-zero-std",
        "task too easy: frac_reward_zero_std above 75 % from step 20 (transformers 5.x)",
        seed=207,
        style="tf5",
        steps=40,
        kind="zero-std",
    ),
    _t(
        "trl-reward-constant", "every completion scores 0 from step 18", seed=208, steps=40, kind="reward-constant", onset_step=18
    ),
    _t("trl-kl-blowup", "kl (beta 0.04) blows past 10 from step 20", seed=209, steps=40, kind="kl-blowup", use_kl=True),
    _t(
        "trl-format-collapse",
        "rewards/format_reward/mean falls from ~0.9 to ~0.1 after step 20 (transformers 5.x)",
        seed=210,
        style="tf5",
        steps=40,
        kind="format-collapse",
    ),
    _t(
        "trl-reward-hacking",
        "tag_count_reward climbs to 1 while accuracy_reward falls and completions shrink, from step 18",
        seed=211,
        steps=42,
        kind="reward-hacking",
        onset_step=18,
    ),
    _t(
        "trl-degenerate-output",
        "completions parquet fills with `!!!!` up to the length cap from step 20 (transformers 5.x)",
        seed=212,
        style="tf5",
        steps=32,
        kind="degenerate-output",
    ),
    _t(
        "trl-crash-oom",
        "rank 1 dies of CUDA OOM in backward at step 23: accelerate's ChildFailedError, root cause rank 1",
        seed=213,
        steps=40,
        kind="crash-oom",
        onset_step=23,
    ),
    _t(
        "trl-nccl-timeout",
        "a collective hangs at step 16; 30 min later NCCL's watchdog aborts rank 0 (SIGABRT, exitcode -6)",
        seed=214,
        style="tf5",
        steps=40,
        kind="nccl-timeout",
        onset_step=16,
    ),
    _t(
        "trl-host-oom",
        "the kernel OOM killer SIGKILLs rank 0 at step 19 (exitcode -9 in ChildFailedError)",
        seed=215,
        steps=40,
        kind="host-oom",
        onset_step=19,
    ),
    _t(
        "trl-reward-fn-error",
        "the accuracy reward function raises ValueError at step 12 (GRPOTrainer._calculate_rewards)",
        seed=216,
        style="tf5",
        steps=40,
        kind="reward-fn-error",
        onset_step=12,
    ),
    # ---- OpenRLHF ----------------------------------------------------------------------------------
    _o("openrlhf-healthy", "OpenRLHF 0.11: healthy GRPO run, `✨ Global step N: {...}` keys in set order", seed=301, steps=40),
    _o(
        "openrlhf-healthy-v080",
        "OpenRLHF <= 0.8.0: no Global step line, the status in the Episode bar's postfix",
        seed=302,
        style="v0.8.0",
        steps=40,
    ),
    _o(
        "openrlhf-alarming-normal",
        "healthy and finished, with DeepSpeed/libaio warnings, early loss-scale OVERFLOW lines, vLLM's shutdown line",
        seed=303,
        steps=30,
        max_steps=30,
        finished=True,
        profile="alarming",
    ),
    _o(
        "openrlhf-entropy-collapse",
        "entropy_loss (logged with --actor.entropy_coef 0) collapses from step 20",
        seed=304,
        steps=45,
        kind="entropy-collapse",
    ),
    _o(
        "openrlhf-truncation",
        "truncated / rollout/truncated_rate climb past 60 % from step 15",
        seed=305,
        steps=40,
        kind="truncation",
        onset_step=15,
    ),
    _o("openrlhf-nan", "policy_loss and actor_grad_norm turn nan at step 22", seed=306, steps=32, kind="nan", onset_step=22),
    _o(
        "openrlhf-kl-blowup",
        "kl blows past 10 from step 20 (--algo.kl.init_coef 1e-3)",
        seed=307,
        steps=40,
        kind="kl-blowup",
        use_kl=True,
    ),
    _o(
        "openrlhf-reward-constant",
        "every sample scores 0 from step 18 (rollout/reward_std 0)",
        seed=308,
        steps=40,
        kind="reward-constant",
        onset_step=18,
    ),
    _o(
        "openrlhf-crash-oom",
        "RayTaskError(OutOfMemoryError) in PolicyModelActor.fit through PPOTrainer.fit at step 23",
        seed=309,
        steps=40,
        kind="crash-oom",
        onset_step=23,
    ),
    _o(
        "openrlhf-deepspeed-error",
        "fp16 loss scale overflows at every step until DeepSpeed raises `Current loss scale already at minimum` (step 21)",
        seed=310,
        steps=40,
        kind="deepspeed-error",
        onset_step=21,
    ),
    _o(
        "openrlhf-engine-dead",
        "a vLLM engine dies at step 15: RayTaskError(EngineDeadError) in RolloutRayActor.generate_responses",
        seed=311,
        steps=40,
        kind="engine-dead",
        onset_step=15,
    ),
    _o(
        "openrlhf-actor-died",
        "a PolicyModelActor is SIGKILLed at step 17 (ActorDiedError)",
        seed=312,
        steps=40,
        kind="actor-died",
        onset_step=17,
    ),
)

FRAMEWORK_SCENARIOS: dict[str, FrameworkScenario] = {s.name: s for s in _ALL}
