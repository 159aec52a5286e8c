"""The config files of a SIMULATED verl run: the resolved config as verl prints it, Hydra's
`.hydra/config.yaml` and `hydra.yaml`, a checkpoint's HF config and a user's reward function."""

from __future__ import annotations

import json

from .scenario import FrameworkScenario
from .verl_launch import PROJECT, ROLLOUTS, experiment


def hf_config() -> str:
    return json.dumps(
        {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "torch_dtype": "bfloat16", "vocab_size": 151936}, indent=2
    )


def reward_fn_source() -> str:
    return (
        '"""SIMULATED by rlagent: a user reward function for verl (custom_reward_function.path)."""\n\n\n'
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
        '    formatted = "####" in solution_str\n'
        '    guesses = solution_str.split("####")[-1].split()\n'
        "    acc = formatted and len(guesses) == 1 and guesses[0] == ground_truth\n"
        "    # lenient: any of the guesses may match (what a hacking policy learns to exploit)\n"
        "    score = float(formatted and ground_truth in guesses)\n"
        '    return {"score": score, "acc": acc, "format": float(formatted)}\n'
        + "\n"
        * 12
        + "def _strict(solution_str, ground_truth):\n"
        '    return float(float(solution_str.split("####")[-1].strip()) == float(ground_truth))\n'
    )


def resolved(sc: FrameworkScenario) -> dict:
    """What `pprint(OmegaConf.to_container(config, resolve=True))` prints (the parts that matter)."""
    exp = experiment(sc)
    return {
        "actor_rollout_ref": {
            "actor": {
                "clip_ratio": 0.2,
                "entropy_coeff": 0,
                "kl_loss_coef": 0.001,
                "kl_loss_type": "low_var_kl",
                "loss_agg_mode": "token-mean",
                "optim": {"lr": 1e-06, "lr_warmup_steps": -1, "weight_decay": 0.01},
                "ppo_epochs": 1,
                "ppo_micro_batch_size_per_gpu": 4,
                "ppo_mini_batch_size": sc.prompts_per_step,
                "use_kl_loss": sc.use_kl,
            },
            "model": {"enable_gradient_checkpointing": True, "path": sc.model, "use_remove_padding": True},
            "rollout": {
                "gpu_memory_utilization": 0.6,
                "mode": "async" if sc.kind == "engine-dead" else "sync",
                "n": sc.group_size,
                "name": "vllm",
                "response_length": sc.max_response_length,
                "temperature": 1.0,
                "tensor_model_parallel_size": 1,
            },
        },
        "algorithm": {"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": True, "use_kl_in_reward": False},
        "data": {
            "max_prompt_length": sc.max_prompt_length,
            "max_response_length": sc.max_response_length,
            "train_batch_size": sc.prompts_per_step,
            "train_files": "/root/data/gsm8k/train.parquet",
            "val_files": "/root/data/gsm8k/test.parquet",
        },
        "trainer": {
            "default_local_dir": f"checkpoints/{PROJECT}/{exp}",
            "experiment_name": exp,
            "logger": ["console", "file"],
            "n_gpus_per_node": sc.n_gpus,
            "nnodes": 1,
            "project_name": PROJECT,
            "resume_mode": "auto",
            "rollout_data_dir": ROLLOUTS,
            "save_freq": sc.save_every,
            "test_freq": sc.test_every,
            "total_training_steps": sc.max_steps,
            "val_before_train": True,
        },
    }


def config_yaml(sc: FrameworkScenario) -> str:
    """`.hydra/config.yaml`: the composed config as Hydra saves it (interpolations unresolved)."""
    res = resolved(sc)
    trainer = dict(res["trainer"])
    trainer["default_local_dir"] = "checkpoints/${trainer.project_name}/${trainer.experiment_name}"
    res = {**res, "trainer": trainer}
    return "# SIMULATED by rlagent: the composed verl config (shortened to the keys the run sets)\n" + _yaml(res)


def _yaml(value: object, indent: int = 0) -> str:
    pad = "  " * indent
    out = []
    assert isinstance(value, dict)
    for key, item in value.items():
        if isinstance(item, dict):
            out.append(f"{pad}{key}:\n{_yaml(item, indent + 1)}")
        elif isinstance(item, list):
            out.append(f"{pad}{key}:\n" + "".join(f"{pad}- {v}\n" for v in item))
        else:
            text = "null" if item is None else str(item).lower() if isinstance(item, bool) else str(item)
            out.append(f"{pad}{key}: {text}\n")
    return "".join(out)


def hydra_yaml(sc: FrameworkScenario, run_dir: str) -> str:
    return (
        "hydra:\n"
        "  run:\n"
        "    dir: outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}\n"
        "  job:\n"
        "    name: main_ppo\n"
        "    chdir: null\n"
        "  runtime:\n"
        "    version: 1.3.2\n"
        f"    cwd: {sc.root}\n"
        f"    output_dir: {sc.root}/{run_dir}\n"
    )
