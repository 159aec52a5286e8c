"""A SIMULATED OpenRLHF run (`python3 -m openrlhf.cli.train_ppo_ray`, group_norm GRPO, Ray + DeepSpeed +
vLLM), in the formats frameworks.md section 3 gives, verified in OpenRLHF's source:

- the console captured from the driver (`... 2>&1 | tee -a train.log`): `bash -x`'s echo of the command, Ray's
  start line, actor output behind `(PPOTrainer pid=N)`, `(PolicyModelActor pid=N)`,
  `(RolloutRayActor pid=N)` prefixes with `[repeated Nx across cluster]`, DeepSpeed's `[date] [INFO] [...]`
  lines, OpenRLHF's logger (`INFO 08-24 14:05:01 ppo_trainer.py:547] ...`); per step the `Sample: [...]` line,
  the actor's `Train epoch [1/1]` bar with its postfix (tqdm `format_num`), and
  - style `v0.11`: `✨ Global step N: {...}` with the actor's keys in set order (fixed within one process,
    so it changes between attempts) followed by the trainer's own keys; `✨ Evaluation completed ...`;
  - style `v0.8.0`: no Global step line: the `Episode [1/1]` bar's postfix carries the whole status;
- DeepSpeed checkpoints `ckpt/checkpoints_ppo_ray/_actor/global_stepN/` (`mp_rank_00_model_states.pt`, one
  `zero_pp_rank_R_mp_rank_00_optim_states.pt` per rank, `metric.json`), the `_actor/latest` tag file,
  `zero_to_fp32.py`, rotation at `--ckpt.max_num` (`Deleted checkpoint ... (no metric (oldest))`);
- the launch script `train_ppo_ray.sh`.
Resume: `--ckpt.load_enable` (older `--load_checkpoint`) with the same `--ckpt.path` loads `_actor/latest`.
"""

from __future__ import annotations

import json

from ..rng import stream
from . import crashtext
from .common import PLACEHOLDER, Plan, clock_for, postfix, py_dict, ray_lines, tqdm_meter
from .numbers import FrameworkNumbers, StepNumbers
from .samples import samples
from .scenario import FrameworkScenario, pid_of

LOG = "train.log"
SCRIPT = "train_ppo_ray.sh"
CKPT = "ckpt/checkpoints_ppo_ray"
MAX_NUM = 3


def load_flag(sc: FrameworkScenario) -> str:
    return "--load_checkpoint" if sc.style == "v0.8.0" else "--ckpt.load_enable"


def args(sc: FrameworkScenario, resume: bool = False) -> list[str]:
    if sc.style == "v0.8.0":  # flags before the dotted groups of v0.10.2
        out = [
            "--ref_num_nodes 1",
            f"--ref_num_gpus_per_node {sc.n_gpus}",
            "--actor_num_nodes 1",
            f"--actor_num_gpus_per_node {sc.n_gpus}",
            f"--vllm_num_engines {sc.n_gpus}",
            "--vllm_tensor_parallel_size 1",
            "--colocate_all_models",
            "--vllm_gpu_memory_utilization 0.6",
            f"--pretrain {sc.model}",
            "--remote_rm_url http://localhost:5000/get_reward",
            f"--save_path /openrlhf/checkpoint/{sc.model_short.lower()}-grpo",
            f"--ckpt_path {CKPT}",
            f"--save_steps {sc.save_every}",
            f"--max_ckpt_num {MAX_NUM}",
            "--micro_train_batch_size 4",
            f"--train_batch_size {sc.batch}",
            "--micro_rollout_batch_size 8",
            f"--rollout_batch_size {sc.prompts_per_step}",
            f"--n_samples_per_prompt {sc.group_size}",
            "--max_epochs 1",
            f"--prompt_max_len {sc.max_prompt_length}",
            f"--generate_max_len {sc.max_response_length}",
            "--advantage_estimator group_norm",
            "--zero_stage 3",
            "--bf16",
            "--actor_learning_rate 5e-7",
            "--init_kl_coef 1e-3" if sc.use_kl else "--init_kl_coef 0",
            "--prompt_data openai/gsm8k",
            "--input_key question",
            "--apply_chat_template",
            "--normalize_reward",
            "--gradient_checkpointing",
            "--packing_samples",
            "--vllm_sync_backend nccl",
            "--enforce_eager",
            "--vllm_enable_sleep",
            "--deepspeed_enable_sleep",
            f"--eval_steps {sc.test_every}",
        ]
    else:
        out = [
            "--ref.num_nodes 1",
            f"--ref.num_gpus_per_node {sc.n_gpus}",
            "--actor.num_nodes 1",
            f"--actor.num_gpus_per_node {sc.n_gpus}",
            f"--vllm.num_engines {sc.n_gpus}",
            "--vllm.tensor_parallel_size 1",
            "--train.colocate_all",
            "--vllm.gpu_memory_utilization 0.6",
            f"--actor.model_name_or_path {sc.model}",
            "--reward.remote_url http://localhost:5000/get_reward",
            f"--ckpt.output_dir /openrlhf/checkpoint/{sc.model_short.lower()}-grpo",
            f"--ckpt.path {CKPT}",
            f"--ckpt.save_steps {sc.save_every}",
            f"--ckpt.max_num {MAX_NUM}",
            "--train.micro_batch_size 4",
            f"--train.batch_size {sc.batch}",
            "--rollout.micro_batch_size 8",
            f"--rollout.batch_size {sc.prompts_per_step}",
            f"--rollout.n_samples_per_prompt {sc.group_size}",
            "--train.max_epochs 1",
            "--train.num_episodes 1",
            f"--data.max_len {sc.max_prompt_length + sc.max_response_length}",
            f"--rollout.max_new_tokens {sc.max_response_length}",
            "--algo.advantage.estimator group_norm",
            "--ds.zero_stage 3",
            "--ds.param_dtype fp16" if sc.kind == "deepspeed-error" else "--ds.param_dtype bf16",
            "--actor.learning_rate 5e-7",
            f"--algo.kl.init_coef {1e-3 if sc.use_kl else 0}",
            "--actor.entropy_coef 0",
            "--data.prompt_dataset openai/gsm8k",
            "--data.input_key question",
            "--data.apply_chat_template",
            "--actor.gradient_checkpointing_enable",
            "--ds.packing_samples",
            "--vllm.sync_backend nccl",
            "--vllm.enforce_eager",
            "--vllm.enable_sleep",
            "--ds.enable_sleep",
            f"--eval.steps {sc.test_every}",
            "--eval.dataset openai/gsm8k",
            "--logger.logging_steps 1",
        ]
    if resume:
        out.append(load_flag(sc))
    return out


def command(sc: FrameworkScenario, resume: bool = False) -> str:
    return "python3 -m openrlhf.cli.train_ppo_ray " + " ".join(args(sc, resume))


def _launch_script(sc: FrameworkScenario) -> str:
    body = " \\\n   ".join(args(sc))
    return (
        "#!/usr/bin/env bash\n"
        "# SIMULATED by rlagent (evals/simulator/frameworks/openrlhf.py): an OpenRLHF GRPO launch (examples/scripts style)\n"
        "set -x\n\n"
        f'python3 -m openrlhf.cli.train_ppo_ray \\\n   {body} "$@" 2>&1 | tee -a {LOG}\n'
    )


ACTOR_KEYS = (
    "policy_loss",
    "actor_lr",
    "actor_grad_norm",
    "ppo_clip_ratio",
    "ppo_kl",
    "kl",
    "logprobs_diff",
    "reward",
    "group_reward_std",
    "return",
    "response_length",
    "truncated",
    "total_length",
    "entropy_loss",
)


def actor_status(sc: FrameworkScenario, num: StepNumbers) -> dict[str, float]:
    """`PolicyModelActor.fit`'s status_mean (before the set-order shuffle)."""
    r = stream(sc.seed, "orlhf-status", num.n)
    return {
        "policy_loss": num.loss,
        "actor_lr": 5e-07,
        "actor_grad_norm": num.grad_norm,
        "ppo_clip_ratio": num.clip_frac,
        "ppo_kl": num.ppo_kl,
        "kl": num.kl if sc.use_kl else 0.0,
        "logprobs_diff": float("nan") if num.nonfinite else 0.0004 * (0.7 + 0.6 * r.random()),
        "reward": num.score,
        "group_reward_std": num.score_std * (1 - num.zero_std_frac),
        "return": num.score,
        "response_length": num.len_mean,
        "truncated": num.clip_ratio,
        "total_length": num.len_mean + num.prompt_mean,
        "entropy_loss": num.entropy,
    }


def set_order(sc: FrameworkScenario, keys: list[str]) -> list[str]:
    """`for k in set().union(...)`: str hashing is salted per process, so the order holds within one
    process and changes with every launch."""
    rng = stream(sc.seed, "orlhf-set-order", sc.attempt)
    order = sorted(ACTOR_KEYS, key=lambda _: rng.random())
    return [k for k in order if k in keys]


def global_status(sc: FrameworkScenario, num: StepNumbers, timings: dict[str, float]) -> list[tuple[str, float]]:
    actor = actor_status(sc, num)
    items = [(k, actor[k]) for k in set_order(sc, list(actor))]
    items += [
        ("timing/make_experience", timings["make_experience"]),
        ("timing/ppo_train", timings["ppo_train"]),
        ("timing/broadcast", timings["broadcast"]),
        ("rollout/reward_mean", num.score),
        ("rollout/reward_std", num.score_std),
        ("rollout/response_length_mean", num.len_mean),
        ("rollout/truncated_rate", num.clip_ratio),
        ("rollout/num_samples", float(sc.batch)),
        ("timing/generation", timings["generation"]),
    ]
    items.append(("timing/step_total", sum(v for k, v in items if k.startswith("timing/"))))
    return items


class OpenRLHFRun:
    def __init__(self, sc: FrameworkScenario, rate: float = 1.0) -> None:
        self.sc = sc
        self.rate = rate
        self.clock = clock_for(sc.start, rate)
        self.num = FrameworkNumbers(sc)
        self.plan = Plan()
        self.trainer = pid_of(sc, "ppotrainer")
        self.policy = [pid_of(sc, f"policy{i}") for i in range(sc.n_gpus)]
        self.ref = [pid_of(sc, f"ref{i}") for i in range(sc.n_gpus)]
        self.vllm = [pid_of(sc, f"vllm{i}") for i in range(sc.n_gpus)]
        self.ip = "10.0.0.9"

    def say(self, t: float, text: str) -> None:
        self.plan.add(t, "driver", LOG, text)

    def ray(self, t: float, actor: str, pid: int, text: str, repeated: int = 0) -> None:
        self.say(t, ray_lines(text, actor, pid, self.sc.ansi, repeated=repeated))

    def log(self, t: float, where: str, text: str, level: str = "INFO") -> None:
        """OpenRLHF's logger in the PPOTrainer actor (NewLineFormatter repeats the head on every line)."""
        head = f"{level} {self.clock.local(t):%m-%d %H:%M:%S} {where}] "
        self.ray(t, "PPOTrainer", self.trainer, head + text.replace("\n", "\r\n" + head))

    def ds(self, t: float, where: str, text: str, pid: int | None = None, repeated: int = 0) -> None:
        when = self.clock.local(t)
        line = f"[{when:%Y-%m-%d %H:%M:%S},{when.microsecond // 1000:03d}] [INFO] [{where}] {text}"
        self.ray(t, "PolicyModelActor", pid or self.policy[0], line, repeated=repeated)

    def build(self) -> Plan:
        sc, plan = self.sc, self.plan
        resume = sc.attempt > 1
        plan.roles = {
            "driver": command(sc, resume),
            "ppotrainer": "ray::PPOTrainer.fit",
            **{f"policy{i}": "ray::PolicyModelActor" for i in range(sc.n_gpus)},
            **{f"ref{i}": "ray::ReferenceModelActor" for i in range(sc.n_gpus)},
            **{f"vllm{i}": "ray::RolloutRayActor" for i in range(sc.n_gpus)},
        }
        if sc.attempt == 1:
            plan.add(0.2, "driver", SCRIPT, _launch_script(sc), op="put")
        t = self.startup()
        episode_start = t
        prompts_total = sc.max_steps * sc.prompts_per_step
        ema: float | None = None
        for n in range(sc.first_step, sc.last_step + 1):
            num = self.num.at(n)
            r = stream(sc.seed, "orlhf-time", n)
            timings = {
                "generation": num.gen_s,
                "make_experience": num.old_log_prob_s + num.ref_s + num.reward_s,
                "ppo_train": num.update_s,
                "broadcast": num.weights_s * (0.8 + 0.4 * r.random()),
            }
            t_gen = t + timings["generation"]
            t_exp = t_gen + timings["make_experience"]
            sample = samples(sc, num, 1)[0]
            self.log(
                t_exp, "ppo_trainer.py:224", f"Sample: {[sample.prompt + sample.completion, 1.0 if sample.correct else 0.0]}"
            )
            if sc.kind == "deepspeed-error" or (sc.profile == "alarming" and n <= 2):
                self.overflow(t_exp + 2.0, n)
            t_train = t_exp + timings["ppo_train"]
            self.actor_bar(t_exp, t_train, num)
            t_end = t_train + timings["broadcast"] + 0.2
            items = global_status(sc, num, timings)
            plan.rows.append((n, "train", dict(items)))
            if sc.style == "v0.11":
                self.log(t_end, "ppo_trainer.py:547", f"✨ Global step {n}: {py_dict(items)}")
                plan.step_times[n] = t_end
            dt = (t_end - t) / self.rate
            ema = dt if ema is None else 0.3 * dt + 0.7 * ema
            done = n * sc.prompts_per_step
            elapsed = (t_end - episode_start) / self.rate
            if sc.style == "v0.8.0":
                # set_postfix(status) redraws the bar at n-1, update() moves it to n (both carry the postfix)
                status = postfix(items)
                self.say(t_end, tqdm_meter(n - 1, sc.max_steps, elapsed, "Episode [1/1]", 1 / ema, status) + "\n")
                self.say(t_end + 0.01, tqdm_meter(n, sc.max_steps, elapsed, "Episode [1/1]", 1 / ema, status) + "\n")
                plan.step_times[n] = t_end + 0.01
            if n % sc.save_every == 0:
                t_end = self.save(t_end + 0.3, n)
            if n % sc.test_every == 0:
                t_end = self.evaluate(t_end + 0.2, n, num)
            if sc.style == "v0.11":
                rate = sc.prompts_per_step / ema
                self.say(t_end + 0.05, tqdm_meter(done, prompts_total, elapsed, "Episode [1/1]", rate) + "\n")
            t = t_end + 0.3
        if sc.ends_early:
            return self.crash(t)
        if sc.finished and sc.last_step == sc.max_steps:
            return self.finish(t)
        plan.end = t + 0.5 * sc.step_time_s
        return plan

    def startup(self) -> float:
        sc = self.sc
        resume = sc.attempt > 1
        self.say(0.0, "+ " + command(sc, resume) + "\n")
        when = self.clock.local(3.6)
        self.say(
            3.6,
            f"{when:%Y-%m-%d %H:%M:%S},{when.microsecond // 1000:03d}\tINFO worker.py:1951 -- Started a local Ray "
            "instance. View the dashboard at 127.0.0.1:8265 \n",
        )
        rep = sc.n_gpus - 1
        stamp = lambda t: self.clock.local(t).strftime("%m-%d %H:%M:%S")  # noqa: E731
        self.ray(
            9.0,
            "RolloutRayActor",
            self.vllm[0],
            f"INFO {stamp(9.0)} [__init__.py:239] Automatically detected platform cuda.",
            repeated=rep,
        )
        self.ray(
            21.0,
            "RolloutRayActor",
            self.vllm[0],
            f"INFO {stamp(21.0)} [core.py:71] Initializing a V1 LLM engine (v0.10.1) "
            f"with config: model='{sc.model}', speculative_config=None, tokenizer='{sc.model}', skip_tokenizer_init=False, "
            "tokenizer_mode=auto, revision=None, trust_remote_code=True, dtype=torch.bfloat16, max_seq_len="
            f"{sc.max_prompt_length + sc.max_response_length}, download_dir=None, load_format=auto, tensor_parallel_size=1, "
            "pipeline_parallel_size=1, disable_custom_all_reduce=False, quantization=None, enforce_eager=True",
            repeated=rep,
        )
        self.ds(30.0, "real_accelerator.py:254:get_accelerator", "Setting ds_accelerator to cuda (auto detect)", repeated=rep)
        if sc.profile == "alarming":
            for k, text in enumerate(
                (
                    "[WARNING]  async_io requires the dev libaio .so object and headers but these were not found.",
                    "[WARNING]  async_io: please install the libaio-dev package with apt",
                    "[WARNING]  If libaio is already installed (perhaps from source), try setting the CFLAGS and LDFLAGS "
                    "environment variables to where it can be found.",
                    "[WARNING]  Please specify the CUTLASS repo directory as environment variable $CUTLASS_PATH",
                )
            ):
                self.ray(31.0 + 0.1 * k, "PolicyModelActor", self.policy[0], text, repeated=rep)
            self.ray(
                40.0,
                "RolloutRayActor",
                self.vllm[0],
                f"WARNING {stamp(40.0)} [utils.py:2522] Methods "
                "determine_num_available_blocks,device_config,get_cache_block_size_bytes,initialize_cache not implemented in "
                f"<vllm.v1.worker.gpu_worker.Worker object at {crashtext.addr(sc.seed, 'gpuworker')}>",
                repeated=rep,
            )
        self.ds(45.0, "comm.py:669:init_distributed", "cdb=None")
        self.ds(46.0, "config.py:733:__init__", "Config mesh_device None world_size = 2", repeated=rep)
        self.ray(58.0, "PolicyModelActor", self.policy[0], "NCCL version 2.21.5+cuda12.4", repeated=rep)
        t = 75.0
        if resume:
            step = sc.resume_step
            path = f"{CKPT}/_actor"
            self.ds(
                t,
                "torch_checkpoint_engine.py:27:load",
                f"[Torch] Loading checkpoint from {path}/global_step{step}/mp_rank_00_model_states.pt...",
            )
            self.ds(
                t + 4,
                "engine.py:3128:_load_checkpoint",
                f"[Torch] Loaded checkpoint from {path}/global_step{step}/mp_rank_00_model_states.pt",
            )
            states = {
                "episode": 0,
                "global_step": step,
                "total_consumed_prompts": step * sc.prompts_per_step,
                "data_loader_state_dict": {"epoch": 0, "seed": 42},
            }
            self.log(t + 8, "ppo_trainer.py:435", f"checkpoint_states: {states}")
            t += 12
        prompts_total = sc.max_steps * sc.prompts_per_step
        if sc.style == "v0.11":
            initial = (sc.first_step - 1) * sc.prompts_per_step
            self.say(t, tqdm_meter(initial, prompts_total, 0.0, "Episode [1/1]") + "\n")
        else:
            self.say(t, tqdm_meter(sc.first_step - 1, sc.max_steps, 0.0, "Episode [1/1]") + "\n")
        return t + 1.0

    def actor_bar(self, t0: float, t1: float, num: StepNumbers) -> None:
        sc = self.sc
        micro = max(2, sc.batch // sc.n_gpus // 4)
        status = actor_status(sc, num)
        short = [
            ("act_loss", status["policy_loss"]),
            ("reward", status["reward"]),
            ("return", status["return"]),
            ("gen_len", status["response_length"]),
            ("tot_len", status["total_length"]),
            ("kl", status["kl"]),
            ("act_lr", status["actor_lr"]),
            ("grad_norm", status["actor_grad_norm"]),
            ("ent_loss", status["entropy_loss"]),
        ]
        elapsed = (t1 - t0) / self.rate
        for k in (micro // 2, micro):
            bar = tqdm_meter(k, micro, elapsed * k / micro, "Train epoch [1/1]", micro / max(elapsed, 1e-3), postfix(short))
            self.say(t0 + (t1 - t0) * k / micro, bar + "\n")

    def overflow(self, t: float, n: int) -> None:
        sc = self.sc
        scale = 65536 if sc.kind != "deepspeed-error" else max(1, 65536 >> (2 * max(0, n - sc.onset_step + 8)))
        self.ds(
            t,
            "loss_scaler.py:277:update_scale",
            f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {scale}, reducing to {max(1, scale // 2)}",
        )

    def save(self, t: float, n: int) -> float:
        sc, plan = self.sc, self.plan
        base = f"{CKPT}/_actor"
        tag = f"global_step{n}"
        older = list(range(sc.save_every, n, sc.save_every))
        if len(older) >= MAX_NUM:
            old = f"./{base}/global_step{older[-MAX_NUM]}"
            plan.add(t, "policy0", f"{base}/global_step{older[-MAX_NUM]}", op="remove")
            self.ray(t, "PolicyModelActor", self.policy[0], f"Deleted checkpoint {old} (no metric (oldest))")
        self.ds(t + 0.2, "logging.py:107:log_dist", f"[Rank 0] [Torch] Checkpoint {tag} is about to be saved!")
        self.ds(
            t + 0.5, "logging.py:107:log_dist", f"[Rank 0] Saving model checkpoint: ./{base}/{tag}/mp_rank_00_model_states.pt"
        )
        plan.add(t + 1.5, "policy0", f"{base}/{tag}/mp_rank_00_model_states.pt", PLACEHOLDER, op="put")
        for rank in range(sc.n_gpus):
            plan.add(
                t + 3.0, f"policy{rank}", f"{base}/{tag}/zero_pp_rank_{rank}_mp_rank_00_optim_states.pt", PLACEHOLDER, op="put"
            )
        self.ds(
            t + 3.1,
            "engine.py:3701:_save_zero_checkpoint",
            f"zero checkpoint saved ./{base}/{tag}/zero_pp_rank_0_mp_rank_00_optim_states.pt",
            repeated=sc.n_gpus - 1,
        )
        plan.add(t + 3.2, "policy0", f"{base}/latest", tag, op="put")
        if n == sc.save_every or (sc.attempt > 1 and n == sc.first_step - 1 + sc.save_every):
            plan.add(
                t + 3.2,
                "policy0",
                f"{base}/zero_to_fp32.py",
                "# SIMULATED placeholder for DeepSpeed's zero_to_fp32.py\n",
                op="put",
            )
        self.ds(
            t + 3.3, "torch_checkpoint_engine.py:33:commit", f"[Torch] Checkpoint {tag} is ready now!", repeated=sc.n_gpus - 1
        )
        plan.add(
            t + 3.4,
            "policy0",
            f"{base}/{tag}/metric.json",
            json.dumps({"metric_key": None, "metric_value": None}, indent=2, sort_keys=True),
            op="put",
        )
        return t + 3.6

    def evaluate(self, t: float, n: int, num: StepNumbers) -> float:
        start = self.clock.local(t)
        self.log(t, "ppo_trainer.py:581", f"⏰ Evaluation start time: {start:%Y-%m-%d %H:%M:%S}")
        took = 58.0 + 10.0 * stream(self.sc.seed, "orlhf-eval", n).random()
        logs = [
            ("eval_openai/gsm8k_pass1", num.val_accuracy),
            ("eval_openai/gsm8k_response_length_mean", num.len_mean * 0.95),
            ("eval_openai/gsm8k_truncated_rate", num.clip_ratio * 0.8),
            ("eval_response_length_mean", num.len_mean * 0.95),
            ("eval_truncated_rate", num.clip_ratio * 0.8),
            ("eval_num_samples", 1319.0),
        ]
        self.plan.rows.append((n, "val", dict(logs)))
        h, rest = divmod(int(took / self.rate), 3600)
        m, s = divmod(rest, 60)
        self.log(
            t + took,
            "ppo_trainer.py:594",
            f"✨ Evaluation completed in {h}:{m:02d}:{s:02d}, global_step {n}, eval_metrics: {py_dict(logs)}",
        )
        return t + took

    def finish(self, t: float) -> Plan:
        sc, plan = self.sc, self.plan
        out = f"checkpoint/{sc.model_short.lower()}-grpo"
        self.ray(t + 5.0, "PolicyModelActor", self.policy[0], f"Saving model to /openrlhf/{out}")
        plan.add(t + 9.0, "policy0", f"{out}/model.safetensors", PLACEHOLDER, op="put")
        plan.add(
            t + 9.1, "policy0", f"{out}/config.json", json.dumps({"architectures": ["Qwen2ForCausalLM"]}, indent=2), op="put"
        )
        stamp = self.clock.local(t + 12).strftime("%m-%d %H:%M:%S")
        # vLLM prints this at every shutdown, clean or not (frameworks.md 4): not a finding alone
        self.ray(
            t + 12.0,
            "RolloutRayActor",
            self.vllm[0],
            f"ERROR {stamp} [core_client.py:564] Engine core proc EngineCore_0 died unexpectedly, shutting down client.",
            repeated=sc.n_gpus - 1,
        )
        plan.end, plan.exit_code = t + 14.0, 0
        return plan

    def crash(self, t: float) -> Plan:
        sc, plan = self.sc, self.plan
        kind = sc.kind
        t_fail = t + 0.6 * sc.step_time_s
        failing, code = "ppotrainer", 1
        if kind == "engine-dead":
            t_fail = t + 0.2 * sc.step_time_s
            stamp = self.clock.local(t_fail).strftime("%m-%d %H:%M:%S")
            self.ray(t_fail, "RolloutRayActor", self.vllm[1 % sc.n_gpus], "\n".join(crashtext.vllm_engine_core_error(stamp)))
            failing = f"vllm{1 % sc.n_gpus}"
        elif kind == "deepspeed-error":
            self.overflow(t_fail - 1.0, sc.onset_step)
            failing = "policy0"
        elif kind == "crash-oom":
            failing = f"policy{sc.n_gpus - 1}"
        elif kind == "actor-died":
            failing, code = f"policy{sc.n_gpus - 1}", -9
        pids = {"ppotrainer": self.trainer, "policy": self.policy[-1], "vllm": self.vllm[1 % sc.n_gpus]}
        text = crashtext.openrlhf_crash(kind, sc.seed, pids, self.ip)
        self.say(t_fail + 2.0, text)
        plan.failing, plan.failing_code, plan.fail_time = failing, code, t_fail
        plan.end, plan.exit_code = t_fail + 3.0, 1
        return plan


def openrlhf_plan(sc: FrameworkScenario, rate: float = 1.0) -> Plan:
    return OpenRLHFRun(sc, rate).build()


def resume_point(root, sc: FrameworkScenario) -> int | None:
    """DeepSpeed `load_checkpoint(load_dir, tag=None)`: the tag in `_actor/latest`."""
    latest = root / CKPT / "_actor" / "latest"
    if not latest.is_file():
        return None
    tag = latest.read_text().strip()
    if not tag.startswith("global_step") or not tag[11:].isdigit() or not (latest.parent / tag).is_dir():
        return None
    return int(tag[11:])
