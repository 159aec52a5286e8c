"""A SIMULATED TRL GRPO run (`accelerate launch ... train_grpo.py`, open-r1 style), in the formats
frameworks.md section 2 gives, verified in TRL's and transformers' source:

- the console (`... 2>&1 | tee -a train.log`): torch elastic's OMP banner (glog `W` lines), rank warnings,
  tqdm's training bar redrawn with `\\r`, and every `logging_steps` a log dict written by
  `ProgressCallback.on_log` through `tqdm.write` (the bar cleared with `\\r` first, redrawn after): in the
  `tf4` style (transformers <= 4.57) raw floats (`loss` rounded to 4 places, `epoch` to 2, bare `nan`), in
  the `tf5` style every float a `.4g` string; metric keys in GRPOTrainer's order (loss, grad_norm,
  learning_rate, num_tokens, completions/*, rewards/<func>/mean|std, reward, reward_std,
  frac_reward_zero_std, kl when beta > 0, entropy, clip_ratio/*, step_time, epoch); the end-of-training
  `{'train_runtime': ...}` dict; a crash's `[rankN]:` traceback and accelerate's `ChildFailedError` block
  with the root-cause rank, NCCL's watchdog lines, or a SIGKILL;
- `output_dir/checkpoint-N/` with `trainer_state.json` (`json.dumps(asdict(state), indent=2, sort_keys=True)`,
  NaN written as `NaN`), placeholder weights, optimizer, scheduler, one `rng_state_<rank>.pth` per rank,
  DeepSpeed's `global_stepN/` and `latest`; `save_total_limit` rotation;
- `output_dir/completions/completions_{step:05d}.parquet` (step, prompt, completion, one column per reward
  function, advantage), written with pyarrow (TRL goes through pandas);
- the launch script, the script (which passes `--resume_from_checkpoint` on to `trainer.train`), its
  config and the accelerate config.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

from . import crashtext
from .common import PLACEHOLDER, Plan, clock_for, py_dict, tqdm_meter
from .numbers import FrameworkNumbers, StepNumbers
from .samples import samples
from .scenario import FrameworkScenario, pid_of

LOG = "train.log"
SCRIPT = "train_grpo.py"
CONFIG = "grpo_config.yaml"
ACCELERATE = "zero2.yaml"
LAUNCH = "launch.sh"
PYTHON = "/opt/conda/bin/python3.11"


def output_dir(sc: FrameworkScenario) -> str:
    return f"{sc.model_short}-GRPO"


def beta(sc: FrameworkScenario) -> float:
    return 0.04 if sc.use_kl else 0.0


def save_limit(sc: FrameworkScenario) -> int:
    return 2


def command(sc: FrameworkScenario, resume: str | None = None) -> str:
    extra = f" --resume_from_checkpoint {resume}" if resume else ""
    return f"accelerate launch --config_file {ACCELERATE} --num_processes {sc.n_gpus} {SCRIPT} --config {CONFIG}{extra}"


def _config(sc: FrameworkScenario) -> str:
    return (
        "# SIMULATED by rlagent (evals/simulator/frameworks/trl.py): GRPOConfig of an open-r1 style run\n"
        f"model_name_or_path: {sc.model}\n"
        "dataset_name: openai/gsm8k\n"
        "dataset_config: main\n"
        f"output_dir: {output_dir(sc)}\n"
        "bf16: true\n"
        f"max_steps: {sc.max_steps}\n"
        "learning_rate: 1.0e-06\n"
        "lr_scheduler_type: constant\n"
        f"per_device_train_batch_size: {sc.batch // sc.n_gpus}\n"
        "gradient_accumulation_steps: 1\n"
        f"num_generations: {sc.group_size}\n"
        f"max_prompt_length: {sc.max_prompt_length}\n"
        f"max_completion_length: {sc.max_response_length}\n"
        f"beta: {beta(sc)}\n"
        "reward_funcs:\n"
        + "".join(f"- {name.removesuffix('_reward')}\n" for name in _funcs(sc))
        + f"logging_steps: {sc.logging_steps}\n"
        "logging_first_step: false\n"
        "log_completions: true\n"
        "save_strategy: steps\n"
        f"save_steps: {sc.save_every}\n"
        f"save_total_limit: {save_limit(sc)}\n"
        "report_to: none\n"
        "seed: 42\n"
    )


def _funcs(sc: FrameworkScenario) -> tuple[str, ...]:
    return ("accuracy_reward", "tag_count_reward") if sc.kind == "reward-hacking" else ("accuracy_reward", "format_reward")


def _script() -> str:
    return (
        '"""SIMULATED by rlagent: an open-r1 style GRPO script (what the simulated processes claim to run)."""\n\n'
        "import logging\nimport sys\n\n"
        "from trl import GRPOConfig, GRPOTrainer, ModelConfig, ScriptArguments, TrlParser\n\n"
        "logger = logging.getLogger(__name__)\n" + "\n" * 22 + "def accuracy_reward(completions, solution, **kwargs):\n"
        "    rewards = []\n"
        "    for completion, solution in zip(completions, solution):\n"
        '        gold = float(solution.split("####")[-1].strip())\n'
        "        rewards.append(float(str(gold) in completion))\n"
        "    return rewards\n" + "\n" * 38 + "def main(script_args, training_args, model_args):\n"
        "    trainer = GRPOTrainer(model=model_args.model_name_or_path, args=training_args, reward_funcs=REWARD_FUNCS)\n"
        "    # passes --resume_from_checkpoint on (a path, or true for the newest checkpoint-N of output_dir)\n"
        "    checkpoint = training_args.resume_from_checkpoint\n"
        "    train_result = trainer.train(resume_from_checkpoint=checkpoint)\n"
        "    trainer.save_model(training_args.output_dir)\n" + "\n" * 2 + 'if __name__ == "__main__":\n'
        "    parser = TrlParser((ScriptArguments, GRPOConfig, ModelConfig))\n"
        "    main(*parser.parse_args_and_config())\n"
    )


def _accelerate_config(sc: FrameworkScenario) -> str:
    return (
        "compute_environment: LOCAL_MACHINE\n"
        "deepspeed_config:\n"
        "  deepspeed_multinode_launcher: standard\n"
        "  offload_optimizer_device: none\n"
        "  offload_param_device: none\n"
        "  zero3_init_flag: false\n"
        "  zero_stage: 2\n"
        "distributed_type: DEEPSPEED\n"
        "mixed_precision: bf16\n"
        "num_machines: 1\n"
        f"num_processes: {sc.n_gpus}\n"
        "use_cpu: false\n"
    )


def _launch_script(sc: FrameworkScenario) -> str:
    return (
        "#!/usr/bin/env bash\n"
        "# SIMULATED by rlagent (evals/simulator/frameworks/trl.py)\n"
        f'{command(sc)} "$@" 2>&1 | tee -a {LOG}\n'
    )


# ---- one log dict ------------------------------------------------------------------------------------


def log_items(sc: FrameworkScenario, nums: list[StepNumbers], epoch: float, num_tokens: float) -> list[tuple[str, object]]:
    """What `Trainer.log` gets for a logging window (GRPOTrainer.log averages each metric over it)."""

    def avg(values: list[float]) -> float | None:
        valid = [v for v in values if not math.isnan(v)]
        return sum(valid) / len(valid) if valid else None

    last = nums[-1]
    loss = sum(n.loss for n in nums) / len(nums)
    items: list[tuple[str, object]] = [
        ("loss", round(loss, 4) if sc.style == "tf4" else loss),
        ("grad_norm", last.grad_norm),
        ("learning_rate", last.lr),
        ("num_tokens", float(num_tokens)),
        ("completions/mean_length", avg([n.len_mean for n in nums])),
        ("completions/min_length", float(round(min(n.len_min for n in nums)))),
        ("completions/max_length", float(round(max(n.len_max for n in nums)))),
        ("completions/clipped_ratio", avg([n.clip_ratio for n in nums])),
    ]
    term = [n.len_mean * (1 - n.clip_ratio) / max(1e-6, 1 - n.clip_ratio * n.len_max / max(n.len_mean, 1)) for n in nums]
    term = [min(t, n.len_mean) if t > 0 else n.len_min for t, n in zip(term, nums, strict=True)]
    items += [
        ("completions/mean_terminated_length", avg(term)),
        ("completions/min_terminated_length", float(round(min(n.len_min for n in nums)))),
        ("completions/max_terminated_length", float(round(max(min(n.len_max, sc.max_response_length - 7) for n in nums)))),
    ]
    for i, (name, _, _) in enumerate(last.components):
        items.append((f"rewards/{name}/mean", avg([n.components[i][1] for n in nums])))
        items.append((f"rewards/{name}/std", avg([n.components[i][2] for n in nums])))
    items += [
        ("reward", avg([n.score for n in nums])),
        ("reward_std", avg([n.score_std for n in nums])),
        ("frac_reward_zero_std", avg([n.zero_std_frac for n in nums])),
    ]
    if sc.use_kl:
        items.append(("kl", avg([n.kl for n in nums])))
    elif sc.profile == "alarming":
        # an older TRL logged `kl` with beta = 0 as nan (findings.md: normal, not a finding)
        items.append(("kl", math.nan))
    items.append(("entropy", avg([n.entropy for n in nums])))
    clip = avg([n.clip_frac for n in nums])
    items += [
        ("clip_ratio/low_mean", 0.0 if clip is not None else None),
        ("clip_ratio/low_min", 0.0 if clip is not None else None),
        ("clip_ratio/high_mean", clip),
        ("clip_ratio/high_max", clip * 2.1 if clip is not None else None),
        ("clip_ratio/region_mean", clip),
        ("step_time", avg([n.step_s for n in nums])),
        ("epoch", round(epoch, 2) if sc.style == "tf4" else epoch),
    ]
    if sc.profile == "alarming" and nums[0].n <= 3:
        items[0] = ("loss", 0.0)  # the advantage-weighted GRPO loss at the first steps (findings.md: normal)
    return items


def console_dict(items: list[tuple[str, object]], style: str) -> str:
    """`str(logs)` as ProgressCallback prints it: 4.x raw values; 5.x every float `f"{v:.4g}"`."""
    if style == "tf5":
        items = [(k, f"{v:.4g}" if isinstance(v, float) else v) for k, v in items]
    return py_dict(items)


def _state_entry(items: list[tuple[str, object]], step: int) -> dict:
    """`{**logs, "step": global_step}` as Trainer.log appends it to log_history (the printers format, not it)."""
    return {**dict(items), "step": step}


# ---- the run -----------------------------------------------------------------------------------------


class TrlRun:
    def __init__(self, sc: FrameworkScenario, rate: float = 1.0) -> None:
        self.sc = sc
        self.rate = rate
        self.clock = clock_for(sc.start, rate)
        self.num = FrameworkNumbers(sc)
        self.plan = Plan(parent="launcher")
        self.launcher = pid_of(sc, "launcher")
        self.ranks = [pid_of(sc, f"rank{i}") for i in range(sc.n_gpus)]
        self.history: list[dict] = []
        self.tokens = 0.0

    def say(self, t: float, text: str, owner: str = "rank0") -> None:
        self.plan.add(t, owner, LOG, text)

    def glog(self, t: float, letter: str, where: str, text: str, pid: int | None = None) -> str:
        return crashtext.glog(letter, self.clock.local(t), pid or self.launcher, where) + text

    def build(self) -> Plan:
        sc, plan = self.sc, self.plan
        resume = None
        if sc.attempt > 1:
            resume = f"{output_dir(sc)}/checkpoint-{sc.resume_step}"
        plan.roles = {
            "launcher": f"{PYTHON} /opt/conda/bin/{command(sc, resume)}",
            **{
                f"rank{i}": f"{PYTHON} -u {SCRIPT} --config {CONFIG}" + (f" --resume_from_checkpoint {resume}" if resume else "")
                for i in range(sc.n_gpus)
            },
        }
        if sc.attempt == 1:
            for rel, text in (
                (LAUNCH, _launch_script(sc)),
                (SCRIPT, _script()),
                (CONFIG, _config(sc)),
                (ACCELERATE, _accelerate_config(sc)),
            ):
                plan.add(0.2, "launcher", rel, text, op="put")
        else:
            self.restore_history()
        t = self.startup()
        bar_start = t
        ema: float | None = None
        window: list[StepNumbers] = []
        steps_per_epoch = max(1, round(sc.max_steps * 1.17))
        self.say(t, tqdm_meter(0, sc.max_steps, 0.0))  # ProgressCallback.on_train_begin: a new bar at 0
        for n in range(sc.first_step, sc.last_step + 1):
            num = self.num.at(n)
            dt = num.step_s + 0.8
            t_end = t + dt
            self.tokens += num.tokens
            window.append(num)
            ema = dt / self.rate if ema is None else 0.3 * dt / self.rate + 0.7 * ema
            bar = tqdm_meter(n, sc.max_steps, (t_end - bar_start) / self.rate, rate=1 / ema)
            self.say(t_end, f"\r{bar}")
            logged = n % sc.logging_steps == 0 or n == sc.max_steps
            if logged:
                items = log_items(sc, window, n / steps_per_epoch, self.tokens_total(n))
                blank = " " * len(bar)
                self.say(t_end + 0.01, f"\r{blank}\r{console_dict(items, sc.style)}\n\r{bar}")
                self.history.append(_state_entry(items, n))
                plan.rows.append((n, "train", dict(items)))  # type: ignore[arg-type]
                plan.step_times[n] = t_end + 0.01
                if sc.samples_kept is None or n > sc.steps - sc.samples_kept:
                    plan.add(
                        t_end + 0.02,
                        "rank0",
                        f"{output_dir(sc)}/completions/completions_{n:05d}.parquet",
                        _parquet(sc, num),
                        op="put",
                    )
                window = []
            if n % sc.save_every == 0 or (n == sc.max_steps and sc.finished):
                t_end = self.save(t_end + 0.5, n)
            t = t_end
        if sc.ends_early:
            return self.crash(t)
        if sc.finished and sc.last_step == sc.max_steps:
            return self.finish(t, bar_start)
        plan.end = t + 0.5 * sc.step_time_s
        return plan

    def tokens_total(self, n: int) -> float:
        return float(sum(self.num.at(k).tokens for k in range(1, n + 1)))

    def restore_history(self) -> None:
        """A resumed Trainer reloads `log_history` from the checkpoint's trainer_state.json."""
        sc = self.sc
        steps_per_epoch = max(1, round(sc.max_steps * 1.17))
        window: list[StepNumbers] = []
        nums = FrameworkNumbers(sc.variant(attempt=1, resume_step=None))
        for n in range(1, (sc.resume_step or 0) + 1):
            window.append(nums.at(n))
            if n % sc.logging_steps == 0:
                self.history.append(_state_entry(log_items(sc, window, n / steps_per_epoch, self.tokens_total(n)), n))
                window = []

    def startup(self) -> float:
        sc = self.sc
        where = "torch/distributed/run.py:792"
        banner = [
            "",
            "*****************************************",
            "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being "
            "overloaded, please further tune the variable for optimal performance in your application as needed. ",
            "*****************************************",
        ]
        self.say(1.8, "".join(self.glog(1.8, "W", where, line) + "\n" for line in banner), owner="launcher")
        t = 9.0
        for rank in range(len(self.ranks)):
            if sc.profile == "alarming" or rank == 0:
                local = self.clock.local(t + 0.3 * rank)
                nanos = local.microsecond * 1000 + rank * 117
                self.say(
                    t + 0.3 * rank,
                    f"[rank{rank}]:[W{local:%m%d %H:%M:%S}.{nanos:09d} ProcessGroupNCCL.cpp:4718] [PG ID 0 PG GUID 0 Rank "
                    f"{rank}]  using GPU {rank} as device used by this process is currently unknown. This can potentially cause "
                    "a hang if this rank to GPU mapping is incorrect. You can pecify device_id in init_process_group() to force "
                    "use of a particular device.\n",
                    owner=f"rank{rank}",
                )
        self.say(14.0, "Map: 100%|██████████| 7473/7473 [00:00<00:00, 31205.87 examples/s]\n")
        self.say(15.0, "Map: 100%|██████████| 1319/1319 [00:00<00:00, 30877.12 examples/s]\n")
        if sc.profile == "alarming":
            self.say(
                16.0,
                "`generation_config` default values have been modified to match model-specific defaults: {'top_k': 20, "
                "'top_p': 0.8, 'repetition_penalty': 1.05}. If this is not desired, please set these values explicitly.\n",
            )
            self.say(16.5, "`use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`.\n")
        return 24.0 + (8.0 if sc.attempt > 1 else 0.0)

    def save(self, t: float, n: int) -> float:
        sc, plan = self.sc, self.plan
        ckpt = f"{output_dir(sc)}/checkpoint-{n}"
        for name in ("config.json", "generation_config.json"):
            plan.add(
                t,
                "rank0",
                f"{ckpt}/{name}",
                json.dumps({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}, indent=2),
                op="put",
            )
        plan.add(t + 2.0, "rank0", f"{ckpt}/model.safetensors", PLACEHOLDER, op="put")
        for rank in range(sc.n_gpus):
            plan.add(
                t + 3.0,
                f"rank{rank}",
                f"{ckpt}/global_step{n}/zero_pp_rank_{rank}_mp_rank_00_optim_states.pt",
                PLACEHOLDER,
                op="put",
            )
            plan.add(t + 3.5, f"rank{rank}", f"{ckpt}/rng_state_{rank}.pth", PLACEHOLDER, op="put")
        plan.add(t + 3.2, "rank0", f"{ckpt}/global_step{n}/mp_rank_00_model_states.pt", PLACEHOLDER, op="put")
        plan.add(t + 3.3, "rank0", f"{ckpt}/latest", f"global_step{n}", op="put")
        plan.add(t + 3.6, "rank0", f"{ckpt}/scheduler.pt", PLACEHOLDER, op="put")
        plan.add(t + 3.7, "rank0", f"{ckpt}/training_args.bin", PLACEHOLDER, op="put")
        plan.add(t + 3.8, "rank0", f"{ckpt}/trainer_state.json", self.trainer_state(n), op="put")
        # save_total_limit: the oldest checkpoints go once the new one is complete
        saved = list(range(sc.save_every, n + 1, sc.save_every))
        if len(saved) > save_limit(sc):
            plan.add(t + 4.0, "rank0", f"{output_dir(sc)}/checkpoint-{saved[-save_limit(sc) - 1]}", op="remove")
        return t + 4.2

    def trainer_state(self, n: int) -> str:
        sc = self.sc
        steps_per_epoch = max(1, round(sc.max_steps * 1.17))
        state = {
            "best_global_step": None,
            "best_metric": None,
            "best_model_checkpoint": None,
            "epoch": n / steps_per_epoch,
            "eval_steps": 500,
            "global_step": n,
            "is_hyper_param_search": False,
            "is_local_process_zero": True,
            "is_world_process_zero": True,
            "log_history": self.history,
            "logging_steps": sc.logging_steps,
            "max_steps": sc.max_steps,
            "num_input_tokens_seen": 0,
            "num_train_epochs": 1,
            "save_steps": sc.save_every,
            "stateful_callbacks": {
                "TrainerControl": {
                    "args": {
                        "should_epoch_stop": False,
                        "should_evaluate": False,
                        "should_log": False,
                        "should_save": True,
                        "should_training_stop": n == sc.max_steps,
                    },
                    "attributes": {},
                }
            },
            "total_flos": 0.0,
            "train_batch_size": sc.batch // sc.n_gpus,
            "trial_name": None,
            "trial_params": None,
        }
        return json.dumps(state, indent=2, sort_keys=True) + "\n"

    def finish(self, t: float, bar_start: float) -> Plan:
        sc, plan = self.sc, self.plan
        runtime = (t - bar_start) / self.rate
        summary = [
            ("train_runtime", round(runtime, 4)),
            ("train_samples_per_second", round(sc.prompts_per_step * sc.max_steps / runtime, 3)),
            ("train_steps_per_second", round(sc.max_steps / runtime, 3)),
            ("train_loss", round(sum(self.num.at(k).loss for k in range(1, sc.max_steps + 1)) / sc.max_steps, 6)),
            ("epoch", round(sc.max_steps / max(1, round(sc.max_steps * 1.17)), 2)),
        ]
        bar = tqdm_meter(sc.max_steps, sc.max_steps, runtime, rate=sc.max_steps / runtime)
        self.say(t + 0.5, f"\r{' ' * len(bar)}\r{console_dict(summary, sc.style)}\n\r{bar}\n")
        out = output_dir(sc)
        plan.add(t + 3.0, "rank0", f"{out}/model.safetensors", PLACEHOLDER, op="put")
        plan.add(t + 3.1, "rank0", f"{out}/config.json", json.dumps({"architectures": ["Qwen2ForCausalLM"]}, indent=2), op="put")
        plan.end, plan.exit_code = t + 8.0, 0
        return plan

    def crash(self, t: float) -> Plan:
        sc, plan = self.sc, self.plan
        kind = sc.kind
        n = sc.onset_step
        host = sc.host
        script = SCRIPT
        binary = PYTHON
        t_fail = t + 0.6 * sc.step_time_s
        failing_rank, code = 1, 1
        if kind == "crash-oom":
            self.say(t_fail, crashtext.trl_traceback(kind, 1, f"/workspace/open-r1/{SCRIPT}"), owner="rank1")
        elif kind == "reward-fn-error":
            t_fail = t + 0.45 * sc.step_time_s
            failing_rank = 0
            self.say(t_fail, crashtext.trl_traceback(kind, 0, f"/workspace/open-r1/{SCRIPT}"), owner="rank0")
            self.say(t_fail + 0.05, crashtext.trl_traceback(kind, 1, f"/workspace/open-r1/{SCRIPT}"), owner="rank1")
        elif kind == "nccl-timeout":
            failing_rank, code = 0, -6
            t_fail = t + 0.3 * sc.step_time_s + 1800.0
            self.say(t_fail, crashtext.nccl_watchdog(self.clock.local(t_fail), 0, 1200 + 12 * n, sc.seed), owner="rank0")
        elif kind == "host-oom":
            failing_rank, code = 0, -9
            t_fail = t + 0.5 * sc.step_time_s
        other = 1 - failing_rank if sc.n_gpus > 1 else None
        api = "torch/distributed/elastic/multiprocessing/api.py"
        lines = ""
        if other is not None:
            lines += (
                self.glog(t_fail + 1.2, "W", f"{api}:900", f"Sending process {self.ranks[other]} closing signal SIGTERM") + "\n"
            )
        lines += (
            self.glog(
                t_fail + 2.4,
                "E",
                f"{api}:874",
                f"failed (exitcode: {code}) local_rank: {failing_rank} (pid: {self.ranks[failing_rank]}) of binary: {binary}",
            )
            + "\n"
        )
        stamp = self.clock.local(t_fail).strftime("%Y-%m-%d_%H:%M:%S")
        lines += crashtext.accelerate_child_failed(
            script, stamp, host, failing_rank, code, self.ranks[failing_rank], deepspeed=True
        )
        self.say(t_fail + 2.4, lines, owner="launcher")
        plan.failing, plan.failing_code, plan.fail_time = f"rank{failing_rank}", code, t_fail
        plan.end, plan.exit_code = t_fail + 3.0, 1
        return plan


def _parquet(sc: FrameworkScenario, num: StepNumbers) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = samples(sc, num, min(sc.batch, 16))
    funcs = [name for name, _, _ in num.components]
    columns: dict[str, list] = {
        "step": [num.n] * len(rows),
        "prompt": [s.prompt for s in rows],
        "completion": [s.completion for s in rows],
    }
    for name in funcs:
        if name == "accuracy_reward":
            columns[name] = [1.0 if s.correct else 0.0 for s in rows]
        elif name == "format_reward":
            columns[name] = [1.0 if s.format_ok else 0.0 for s in rows]
        else:
            columns[name] = [1.0 if s.kind == "hacked" else (0.75 if s.format_ok else 0.25) for s in rows]
    totals = [sum(columns[f][i] for f in funcs) for i in range(len(rows))]
    advantages = []
    for i in range(len(rows)):
        g = i // sc.group_size * sc.group_size
        group = totals[g : g + sc.group_size]
        mean = sum(group) / len(group)
        std = (sum((x - mean) ** 2 for x in group) / max(1, len(group) - 1)) ** 0.5
        advantages.append((totals[i] - mean) / (std + 1e-4))
    columns["advantage"] = advantages
    buffer = io.BytesIO()
    pq.write_table(pa.table(columns), buffer)
    return buffer.getvalue()


def trl_plan(sc: FrameworkScenario, rate: float = 1.0) -> Plan:
    return TrlRun(sc, rate).build()


def resume_point(root, sc: FrameworkScenario, requested: str | None = None) -> int | None:
    """transformers: `resume_from_checkpoint=True` -> get_last_checkpoint(output_dir); a path -> that one."""
    import re

    base = root / output_dir(sc)
    if requested and requested.lower() not in ("true", "1"):
        path = Path(requested) if requested.startswith("/") else root / requested  # transformers takes either
        match = re.search(r"checkpoint-(\d+)/?$", requested)
        if not match or not (path / "trainer_state.json").is_file():
            return None
        return int(match.group(1))
    if not base.is_dir():
        return None
    steps = [
        int(m.group(1))
        for p in base.iterdir()
        if (m := re.fullmatch(r"checkpoint-(\d+)", p.name)) and (p / "trainer_state.json").is_file()
    ]
    return max(steps) if steps else None
