"""A SIMULATED verl run's names and launch: its log, script, project and checkpoint paths, and the
`python3 -m verl.trainer.main_ppo` command with its Hydra overrides (frameworks.md section 1)."""

from __future__ import annotations

from .scenario import FrameworkScenario

LOG = "verl_demo.log"
SCRIPT = "run_grpo.sh"
PROJECT = "verl_grpo_example_gsm8k"
DATA_SOURCE = "openai/gsm8k"
ROLLOUTS = "rollouts"
REWARD_FN = "reward_fn.py"


def experiment(sc: FrameworkScenario) -> str:
    return f"{sc.model_short.lower().replace('-', '_').replace('.', '_')}_function_rm"


def ckpt_dir(sc: FrameworkScenario) -> str:
    return f"checkpoints/{PROJECT}/{experiment(sc)}"


def file_logger_path(sc: FrameworkScenario) -> str:
    return f"{PROJECT}/{experiment(sc)}.jsonl"


def custom_reward(sc: FrameworkScenario) -> bool:
    """Runs whose reward function is the user's own file (returns extra info columns)."""
    return sc.kind in ("reward-fn-error", "reward-hacking")


def overrides(sc: FrameworkScenario, resume: bool = False) -> list[str]:
    """The Hydra overrides of the launch command (examples/grpo_trainer/run_qwen2-7b_math.sh, shrunk)."""
    out = [
        "algorithm.adv_estimator=grpo",
        "data.train_files=$HOME/data/gsm8k/train.parquet",
        "data.val_files=$HOME/data/gsm8k/test.parquet",
        f"data.train_batch_size={sc.prompts_per_step}",
        f"data.max_prompt_length={sc.max_prompt_length}",
        f"data.max_response_length={sc.max_response_length}",
        "data.filter_overlong_prompts=True",
        "data.truncation=error",
        f"actor_rollout_ref.model.path={sc.model}",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        "actor_rollout_ref.model.use_remove_padding=True",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={sc.prompts_per_step}",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        f"actor_rollout_ref.actor.use_kl_loss={sc.use_kl}",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        "actor_rollout_ref.actor.entropy_coeff=0",
        "actor_rollout_ref.model.enable_gradient_checkpointing=True",
        "actor_rollout_ref.actor.fsdp_config.param_offload=False",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        f"actor_rollout_ref.rollout.n={sc.group_size}",
    ]
    if sc.kind == "engine-dead":
        out.append("actor_rollout_ref.rollout.mode=async")
    out += [
        "algorithm.use_kl_in_reward=False",
        "trainer.critic_warmup=0",
        'trainer.logger=["console","file"]',
        f"trainer.project_name={PROJECT}",
        f"trainer.experiment_name={experiment(sc)}",
        f"trainer.n_gpus_per_node={sc.n_gpus}",
        "trainer.nnodes=1",
        f"trainer.save_freq={sc.save_every}",
        f"trainer.test_freq={sc.test_every}",
        f"trainer.total_training_steps={sc.max_steps}",
        f"trainer.rollout_data_dir={ROLLOUTS}",
    ]
    if custom_reward(sc):
        out += [f"custom_reward_function.path={REWARD_FN}", "custom_reward_function.name=compute_score"]
    if resume:
        out.append("trainer.resume_mode=auto")
    return out


def command(sc: FrameworkScenario, resume: bool = False) -> str:
    """The command as the process (and `bash -x`) sees it: `$HOME` expanded."""
    return "python3 -m verl.trainer.main_ppo " + " ".join(_quote(o) for o in expanded(sc, resume))


def expanded(sc: FrameworkScenario, resume: bool = False) -> list[str]:
    return [o.replace("$HOME", "/root") for o in overrides(sc, resume)]


def _quote(arg: str) -> str:
    return f"'{arg}'" if any(c in arg for c in "[]'\" ") else arg


def launch_script(sc: FrameworkScenario) -> str:
    body = " \\\n    ".join(_quote(o) for o in overrides(sc))
    return (
        "#!/usr/bin/env bash\n"
        "# SIMULATED by rlagent (evals/simulator/frameworks/verl.py): a verl GRPO launch as examples/grpo_trainer writes it.\n"
        "set -x\n\n"
        f"python3 -m verl.trainer.main_ppo \\\n    {body} $@ 2>&1 | tee -a {LOG}\n"
    )
