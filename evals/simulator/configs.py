"""The resolved configs the launcher writes under `configs/` (formats doc, "Key settings").

H writes JSON with nulls kept (`configs/{trainer,orchestrator,inference}.json` and
`configs/envs/{train,eval}/<env>.json`); L writes TOML without nulls. Only the keys a monitor
reads plus enough neighbours to look real; the values come from the scenario.
"""

from __future__ import annotations

import json

from .scenario import Scenario


def _model(sc: Scenario) -> dict:
    return {"name": sc.model, "seq_len": sc.seq_len, "dtype": "bfloat16", "impl": "liger_kernel", "compile": None}


def _ckpt(sc: Scenario) -> dict:
    return {"interval": sc.ckpt_interval, "keep_last": None, "keep_interval": None, "output_dir": None}


def h_configs(sc: Scenario) -> dict[str, bytes]:
    run_dir = sc.sim_run_dir
    trainer = {
        "max_steps": sc.max_steps,
        "output_dir": run_dir,
        "model": _model(sc),
        "optim": {"type": "adamw", "lr": 3e-6, "weight_decay": 0.01, "max_norm": 1.0, "betas1": 0.9, "betas2": 0.999},
        "scheduler": {"type": "constant", "warmup_steps": 0},
        "loss": {"ratio_type": "token", "mask_ratio_high": 8.0, "mask_ratio_low": 0.125, "kl_tau": None},
        "ckpt": _ckpt(sc),
        "resume": {"step": None, "dir": None},
        "log": {"level": "info", "json_logging": False},
        "monitors": {"file": {"filename": "metrics.jsonl"}, "wandb": None},
    }
    sources = [{"name": env, "group_size": sc.group_size, "env": {"id": env, "args": {}, "address": None}} for env in sc.envs]
    orchestrator = {
        "max_steps": sc.max_steps,
        "output_dir": run_dir,
        "model": {"name": sc.model},
        "batch_size": sc.batch_size,
        "token_batch_size": None,
        "group_size": sc.group_size,
        "seq_len": sc.seq_len,
        "max_off_policy_steps": 8,
        "train": {
            "sampling": {"temperature": 1.0, "max_completion_tokens": sc.max_completion_tokens, "top_p": None},
            "source": sources,
        },
        "eval": {
            "interval": sc.eval_interval,
            "envs": [
                {"name": env, "num_examples": sc.eval_examples, "rollouts_per_example": sc.eval_k} for env in sc.eval_env_names
            ],
        }
        if sc.eval_env_names
        else None,
        "client": {"base_url": ["http://localhost:8000/v1"], "timeout": 1200},
        "ckpt": _ckpt(sc),
        "log": {"level": "info", "interval": 10, "json_logging": False},
        "monitors": {"file": {"filename": "metrics.jsonl"}, "wandb": None},
    }
    inference = {
        "model": {"name": sc.model, "max_model_len": sc.seq_len, "enforce_eager": False},
        "server": {"host": None, "port": 8000},
        "parallel": {"tp": 1, "dp": sc.inference_gpus},
        "gpu_memory_utilization": 0.9,
    }
    files = {
        "configs/trainer.json": trainer,
        "configs/orchestrator.json": orchestrator,
        "configs/inference.json": inference,
    }
    for env in sc.envs:
        files[f"configs/envs/train/{env}.json"] = {"id": env, "args": {}, "group_size": sc.group_size}
    for env in sc.eval_env_names:
        files[f"configs/envs/eval/{env}.json"] = {"id": env, "args": {}, "num_examples": sc.eval_examples}
    if sc.resume_step is not None:
        trainer["resume"] = {"step": sc.resume_step, "dir": None}
    if sc.slurm:
        files["configs/rl.json"] = {
            "output_dir": sc.output_root,
            "run": {"name": sc.run_name, "dir": None},
            "max_steps": sc.max_steps,
            "seq_len": sc.seq_len,
            "trainer": trainer,
            "orchestrator": orchestrator,
            "inference": inference,
            "deployment": {"type": "single_node", "num_train_gpus": sc.trainer_gpus, "num_infer_gpus": sc.inference_gpus},
            "ckpt": _ckpt(sc),
            "resume": trainer["resume"],
            "monitors": trainer["monitors"],
        }
    out = {path: (json.dumps(body, indent=2) + "\n").encode() for path, body in files.items()}
    if sc.slurm:
        out["rl.sbatch"] = _sbatch(sc).encode()
    return out


def _sbatch(sc: Scenario) -> str:
    """The single-node job script the launcher writes and submits (output to job_%j.log)."""
    run_dir = sc.sim_run_dir
    return (
        "#!/bin/bash\n"
        f"#SBATCH --job-name={sc.run_name}\n"
        "#SBATCH --nodes=1\n"
        f"#SBATCH --gpus-per-node={sc.trainer_gpus + sc.inference_gpus}\n"
        f"#SBATCH --output={run_dir}/job_%j.log\n"
        "#SBATCH --exclusive\n"
        "\n"
        "set -e\n"
        "cd /workspace/prime-rl\n"
        f"uv run rl @ {run_dir}/configs/rl.json\n"
    )


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _is_table_array(v: object) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def to_toml(doc: dict, _prefix: str = "") -> str:
    """A minimal TOML writer (tables, arrays of tables, scalars; None dropped like exclude_none)."""
    out = [
        f"{k} = {_toml_value(v)}" for k, v in doc.items() if v is not None and not isinstance(v, dict) and not _is_table_array(v)
    ]
    text = "\n".join(out) + ("\n" if out else "")
    for k, v in doc.items():
        name = f"{_prefix}{k}"
        if isinstance(v, dict):
            has_scalars = any(x is not None and not isinstance(x, dict) and not _is_table_array(x) for x in v.values())
            text += (f"\n[{name}]\n" if has_scalars else "") + to_toml(v, name + ".")
        elif _is_table_array(v):
            for item in v:
                text += f"\n[[{name}]]\n" + to_toml(item, name + ".")
    return text


def l_configs(sc: Scenario) -> dict[str, bytes]:
    trainer = {
        "max_steps": sc.max_steps,
        "output_dir": "outputs",
        "model": {"name": sc.model, "seq_len": sc.seq_len},
        "optim": {"lr": 3e-6, "max_norm": 1.0, "weight_decay": 0.01},
        "ckpt": {"interval": sc.ckpt_interval, "resume_step": sc.resume_step},
    }
    orchestrator = {
        "max_steps": sc.max_steps,
        "seq_len": sc.seq_len,
        "output_dir": "outputs/run_default",
        "batch_size": sc.batch_size,
        "rollouts_per_example": sc.group_size,
        "max_async_level": 1,
        "max_off_policy_steps": 8,
        "model": {"name": sc.model},
        "train": {"sampling": {"temperature": 1.0, "max_completion_tokens": sc.max_completion_tokens}},
        "env": [{"id": env} for env in sc.envs],
        "eval": {
            "interval": sc.eval_interval,
            "env": [
                {"id": env, "num_examples": sc.eval_examples, "rollouts_per_example": sc.eval_k} for env in sc.eval_env_names
            ],
        }
        if sc.eval_env_names
        else None,
        "ckpt": {"interval": sc.ckpt_interval, "resume_step": sc.resume_step},
    }
    inference = {
        "model": {"name": sc.model, "max_model_len": sc.seq_len},
        "server": {"port": 8000},
        "parallel": {"tp": 1, "dp": sc.inference_gpus},
    }
    return {
        "configs/trainer.toml": to_toml(trainer).lstrip("\n").encode(),
        "configs/orchestrator.toml": to_toml(orchestrator).lstrip("\n").encode(),
        "configs/inference.toml": to_toml(inference).lstrip("\n").encode(),
    }


def configs(sc: Scenario) -> dict[str, bytes]:
    return h_configs(sc) if sc.layout == "H" else l_configs(sc)
