"""A SIMULATED verl run (`python3 -m verl.trainer.main_ppo`, GRPO, FSDP workers, vLLM rollout), in verl's
formats as frameworks.md section 1 gives them, verified in verl's source:

- the console as captured from the driver (`... 2>&1 | tee verl_demo.log`): `bash -x`'s echo of the command,
  Ray's start line, worker output behind Ray's `(TaskRunner pid=N)` / `(WorkerDict pid=N)` prefixes (colorama
  dim cyan when `ansi`), `[repeated Nx across cluster]` and Ray's one-time dedup note, the resolved config
  pprint, `Checkpoint tracker file does not exist` / `Training from scratch` or the resume lines, the
  validation sample print, tqdm's `Training Progress` bar (glued to the next line by `\\r` when
  `glued_tqdm`), `("Initial validation metrics: ...")`, `step:0 - val-core/...`, one
  `step:N - key:value - ...` line per step in `fit()`'s insertion order, in the scenario's style:
  `v0.4` `f"{v:.3f}"`, `v0.5-numpy1` `pprint.pformat` (plain reprs), `v0.7-numpy2` with worker metrics as
  `np.float64(...)`; `Final validation metrics` at the end; a crash's Hydra banner and Ray traceback;
- the `file` logger JSONL `{project}/{experiment}.jsonl` (`{"step": N, "data": {...}}`, orjson: NaN -> null);
- rollout dumps `rollouts/{step}.jsonl` (`input, output, gts, score, step` + reward extra columns);
- checkpoints `checkpoints/{project}/{experiment}/global_step_N/{actor/..., data.pt}` and
  `latest_checkpointed_iteration.txt`;
- Hydra's output dir `outputs/<date>/<time>/.hydra/{config,hydra,overrides}.yaml` and `main_ppo.log`;
- the launch script `run_grpo.sh`.
Resume: `trainer.resume_mode=auto` (verl's default) reads the tracker and continues at N + 1.
The run's names and launch command are in `verl_launch.py`, its config files in `verl_config.py`.
"""

from __future__ import annotations

import json
import math
import pprint

import orjson

from ..rng import stream
from . import crashtext
from .common import DEDUP_NOTE, PLACEHOLDER, Plan, clock_for, ray_lines, tqdm_meter
from .numbers import FrameworkNumbers, StepNumbers
from .samples import samples
from .scenario import FrameworkScenario, pid_of
from .verl_config import config_yaml, hf_config, hydra_yaml, resolved, reward_fn_source
from .verl_launch import (
    DATA_SOURCE,
    LOG,
    REWARD_FN,
    ROLLOUTS,
    SCRIPT,
    ckpt_dir,
    command,
    custom_reward,
    expanded,
    file_logger_path,
    launch_script,
)

# ---- the step line ----------------------------------------------------------------------------------

Metric = tuple[str, float | int | bool, bool]
"""(key, value, worker-side: numpy-reduced, so `np.float64(...)` under numpy 2)."""


def _timing_names(sc: FrameworkScenario, tested: bool, saved: bool, dumped: bool) -> list[str]:
    names = ["start_profile"] if sc.style != "v0.4" else []
    if sc.style != "v0.4":
        names += ["generate_sequences", "reshard"]
    names += ["gen", "reward", "old_log_prob"]
    if sc.use_kl:
        names.append("ref")
    names += ["adv", "update_actor"]
    if sc.style == "v0.7-numpy2":
        names.append("update_weights")
    if dumped:
        names.append("dump_rollout_generations")
    names.append("step")
    if tested:
        names.append("testing")
    if saved:
        names.append("save_checkpoint")
    if sc.style != "v0.4":
        names.append("stop_profile")
    return names


def step_metrics(
    sc: FrameworkScenario, num: StepNumbers, epoch: int, val: list[Metric], saved: bool, dumped: bool, timings: dict[str, float]
) -> list[Metric]:
    """One step's metrics dict of `RayPPOTrainer.fit()`, in insertion order."""
    n = num.n
    r = stream(sc.seed, "verl-line", n)
    tokens = num.tokens
    per_gpu = tokens / sc.n_gpus
    mins = [round(per_gpu * (0.985 + 0.03 * r.random())) for _ in range(sc.n_gpus)]
    balanced = sum(mins) / len(mins)
    out: list[Metric] = [
        ("global_seqlen/min", min(mins), False),
        ("global_seqlen/max", max(mins), False),
        ("global_seqlen/minmax_diff", max(mins) - min(mins), False),
        ("global_seqlen/balanced_min", math.floor(balanced), False),
        ("global_seqlen/balanced_max", math.ceil(balanced), False),
        ("global_seqlen/mean", float(sum(mins)) / len(mins), False),
        ("actor/entropy", num.entropy, False),
    ]
    if sc.style != "v0.4":
        out.append(("perf/mfu/actor_infer", 0.0 if num.nonfinite else num.mfu * 0.8, False))
    out.append(("actor/pg_loss", num.loss, True))
    if sc.use_kl:
        out.append(("actor/kl_loss", num.kl, True))
    out += [
        ("actor/pg_clipfrac", num.clip_frac, True),
        ("actor/ppo_kl", num.ppo_kl, True),
        ("actor/pg_clipfrac_lower", 0.0, True),
    ]
    if sc.use_kl:
        out.append(("actor/kl_coef", num.kl_coef, True))
    out += [
        ("actor/grad_norm", num.grad_norm, True),
        ("perf/mfu/actor", num.mfu, True),
        ("perf/max_memory_allocated_gb", num.mem_alloc_gb, True),
        ("perf/max_memory_reserved_gb", num.mem_reserved_gb, True),
        ("perf/cpu_memory_used_gb", num.cpu_mem_gb, True),
        ("actor/lr", num.lr, True),
    ]
    out += val
    out += [("training/global_step", n, False), ("training/epoch", epoch, False)]
    out += [
        ("critic/score/mean", num.score, False),
        ("critic/score/max", num.score_max, False),
        ("critic/score/min", num.score_min, False),
        ("critic/rewards/mean", num.score, False),
        ("critic/rewards/max", num.score_max, False),
        ("critic/rewards/min", num.score_min, False),
        ("critic/advantages/mean", 0.0006 * r.gauss(0, 1), False),
        ("critic/advantages/max", num.advantage_max, False),
        ("critic/advantages/min", num.advantage_min, False),
        ("critic/returns/mean", 0.0006 * r.gauss(0, 1), False),
        ("critic/returns/max", num.advantage_max, False),
        ("critic/returns/min", num.advantage_min, False),
    ]
    lengths = [
        ("response_length/mean", num.len_mean, False),
        ("response_length/max", float(round(num.len_max)), False),
        ("response_length/min", float(round(num.len_min)), False),
        ("response_length/clip_ratio", num.clip_ratio, False),
    ]
    out += lengths
    if sc.style == "v0.7-numpy2":
        out += [(key.replace("response_length/", "response_length_non_aborted/"), v, w) for key, v, w in lengths]
        out.append(("response/aborted_ratio", 0.0, False))
    out += [
        ("prompt_length/mean", num.prompt_mean, False),
        ("prompt_length/max", float(round(num.prompt_max)), False),
        ("prompt_length/min", float(round(num.prompt_min)), False),
        ("prompt_length/clip_ratio", 0.0, False),
    ]
    out += [(f"timing_s/{name}", value, False) for name, value in timings.items()]
    response_tokens = max(1.0, num.len_mean * sc.batch)
    per_token = {"gen": timings["gen"] * 1000 / response_tokens}
    for name in ("ref", "adv", "update_actor"):
        if name in timings:
            per_token[name] = timings[name] * 1000 / tokens
    for name in _set_order(sc, list(per_token)):
        out.append((f"timing_per_token_ms/{name}", per_token[name], False))
    out += [
        ("perf/total_num_tokens", tokens, False),
        ("perf/time_per_step", timings["step"], False),
        ("perf/throughput", tokens / (timings["step"] * sc.n_gpus), False),
    ]
    return out


def _set_order(sc: FrameworkScenario, names: list[str]) -> list[str]:
    """compute_timing_metrics iterates a set of names: an order fixed within one process (one attempt)."""
    rng = stream(sc.seed, "verl-set-order", sc.attempt)
    order = sorted(["gen", "ref", "values", "adv", "update_critic", "update_actor"], key=lambda _: rng.random())
    return [name for name in order if name in names]


def _value(value: float | int | bool, worker: bool, style: str) -> str:
    if style == "v0.4":
        return f"{value:.3f}"
    text = repr(value)
    if style == "v0.7-numpy2" and worker:
        return f"np.float64({text})"
    return text


def step_line(n: int, metrics: list[Metric], style: str) -> str:
    """aggregate_logger.concat_dict_to_str."""
    return " - ".join([f"step:{n}", *(f"{key}:{_value(v, w, style)}" for key, v, w in metrics)])


def _val_metrics(sc: FrameworkScenario, num: StepNumbers) -> list[Metric]:
    """`_val_metrics_update`: core var `acc` when the reward returns it, else `reward` (n = 1: `mean@1`)."""
    if custom_reward(sc):
        return [
            (f"val-aux/{DATA_SOURCE}/reward/mean@1", num.val_accuracy + 0.6 * num.hacked_frac * (1 - num.val_accuracy), True),
            (f"val-core/{DATA_SOURCE}/acc/mean@1", num.val_accuracy, True),
        ]
    return [(f"val-core/{DATA_SOURCE}/reward/mean@1", num.val_accuracy, True)]


# ---- the run ---------------------------------------------------------------------------------------


class VerlRun:
    """The plan of one attempt of a verl run."""

    def __init__(self, sc: FrameworkScenario, rate: float = 1.0) -> None:
        self.sc = sc
        self.rate = rate
        self.clock = clock_for(sc.start, rate)
        self.num = FrameworkNumbers(sc)
        self.plan = Plan()
        self.driver = pid_of(sc, "driver")
        self.taskrunner = pid_of(sc, "taskrunner")
        self.workers = [pid_of(sc, f"worker{i}") for i in range(sc.n_gpus)]
        self.ip = "10.0.0.7"

    # output helpers
    def say(self, t: float, text: str) -> None:
        self.plan.add(t, "driver", LOG, text)

    def ray(self, t: float, actor: str, pid: int, text: str, repeated: int = 0) -> None:
        self.say(t, ray_lines(text, actor, pid, self.sc.ansi, repeated=repeated))

    def tr(self, t: float, text: str) -> None:
        self.ray(t, "TaskRunner", self.taskrunner, text)

    def wk(self, t: float, text: str, all_ranks: bool = True) -> None:
        self.ray(t, "WorkerDict", self.workers[0], text, repeated=self.sc.n_gpus - 1 if all_ranks else 0)

    def abs_path(self, rel: str) -> str:
        return f"{self.sc.root}/{rel}"

    def build(self) -> Plan:
        sc, plan = self.sc, self.plan
        plan.roles = {
            "driver": command(sc, resume=sc.attempt > 1),
            "taskrunner": "ray::TaskRunner.run",
            **{f"worker{i}": "ray::WorkerDict" for i in range(sc.n_gpus)},
        }
        t = self.startup()
        if sc.kind == "hydra-error" and sc.ends_early:
            return self.crash(t + 4.0)
        t = self.validate_first(t)
        bar_start = t
        ema: float | None = None
        epoch_len = max(1, sc.max_steps // 3)
        for n in range(sc.first_step, sc.last_step + 1):
            num = self.num.at(n)
            tested = n % sc.test_every == 0 or n == sc.max_steps
            saved = n % sc.save_every == 0 or n == sc.max_steps
            dumped = sc.samples_kept is None or n > sc.steps - sc.samples_kept
            timings = self.timings(num, tested, saved, dumped)
            t_gen = t + timings["gen"]
            t_end = t + timings["step"] + timings.get("testing", 0) + timings.get("save_checkpoint", 0) + 0.3
            if dumped:
                self.dump(t_gen + timings["reward"] + timings["old_log_prob"] + timings["update_actor"], num)
            val: list[Metric] = []
            if tested:
                t_val = t + timings["step"] + timings["testing"] * 0.9
                self.tr(t_val, "validation generation end")
                val = _val_metrics(sc, num)
            if saved:
                self.save(t_end - 0.2 - (timings.get("save_checkpoint", 0) * 0.5), n)
            metrics = step_metrics(sc, num, (n - 1) // epoch_len, val, saved, dumped, timings)
            dt = (t_end - t) / self.rate  # tqdm measures real seconds (a live run is sped up)
            ema = dt if ema is None else 0.3 * dt + 0.7 * ema
            bar = tqdm_meter(n, sc.max_steps, (t_end - bar_start) / self.rate, "Training Progress", 1 / ema)
            line = step_line(n, metrics, sc.style)
            if sc.glued_tqdm:
                self.say(t_end, f"\r{bar}{line}\n")
            else:
                self.say(t_end - 0.05, bar + "\n")
                self.ray(t_end, "TaskRunner", self.taskrunner, line)
            plan.add(t_end, "taskrunner", file_logger_path(sc), _jsonl(n, metrics))
            plan.rows.append((n, "train", {key: value for key, value, _ in metrics}))
            plan.step_times[n] = t_end
            t = t_end + 0.4
        if sc.ends_early:
            return self.crash(t)
        if sc.finished and sc.last_step == sc.max_steps:
            final = _val_metrics(sc, self.num.at(sc.max_steps))
            text = pprint.pformat(f"Final validation metrics: {dict((k, v) for k, v, _ in final)}")
            self.tr(t + 0.5, text)
            plan.end, plan.exit_code = t + 6.0, 0
            return plan
        plan.end = t + 0.5 * sc.step_time_s
        return plan

    def timings(self, num: StepNumbers, tested: bool, saved: bool, dumped: bool) -> dict[str, float]:
        sc = self.sc
        r = stream(sc.seed, "verl-timing", num.n)
        raw = {
            "start_profile": 4e-5 + 3e-5 * r.random(),
            "generate_sequences": num.gen_s * 0.97,
            "reshard": 0.2 + 0.1 * r.random(),
            "gen": num.gen_s,
            "reward": num.reward_s,
            "old_log_prob": num.old_log_prob_s,
            "ref": num.ref_s,
            "adv": num.adv_s,
            "update_actor": num.update_s,
            "update_weights": num.weights_s,
            "dump_rollout_generations": 0.05 + 0.03 * r.random(),
            "step": 0.0,
            "testing": 14.0 + 6.0 * r.random(),
            "save_checkpoint": 8.0 + 5.0 * r.random(),
            "stop_profile": 3e-5 + 2e-5 * r.random(),
        }
        names = _timing_names(sc, tested, saved, dumped)
        inside = [
            k for k in names if k not in ("step", "testing", "save_checkpoint", "stop_profile", "generate_sequences", "reshard")
        ]
        raw["step"] = sum(raw[k] for k in inside) + 0.4
        return {name: raw[name] for name in names}

    # ---- phases -----------------------------------------------------------------------------------

    def startup(self) -> float:
        sc, plan = self.sc, self.plan
        clock = self.clock
        resume = sc.attempt > 1
        self.say(0.0, "+ " + command(sc, resume) + "\n")
        env = (
            "{'num_cpus': None, 'runtime_env': {'env_vars': {'TOKENIZERS_PARALLELISM': 'true', 'NCCL_DEBUG': 'WARN', "
            "'VLLM_LOGGING_LEVEL': 'WARN', 'VLLM_ALLOW_RUNTIME_LORA_UPDATING': 'true', 'CUDA_DEVICE_MAX_CONNECTIONS': '1'}}}"
        )
        self.say(2.4, f"ray init kwargs: {env}\n")
        when = clock.local(4.1)
        self.say(
            4.1,
            f"{when:%Y-%m-%d %H:%M:%S},{when.microsecond // 1000:03d}\tINFO worker.py:1951 -- Started a local Ray "
            "instance. View the dashboard at 127.0.0.1:8265 \n",
        )
        self.tr(7.3, f"TaskRunner hostname: {sc.host}, PID: {self.taskrunner}")
        self.tr(7.4, pprint.pformat(resolved(sc), width=100))
        hydra = f"outputs/{clock.local(0):%Y-%m-%d}/{clock.local(0):%H-%M-%S}"
        plan.add(0.9, "driver", f"{hydra}/.hydra/config.yaml", config_yaml(sc), op="put")
        plan.add(0.9, "driver", f"{hydra}/.hydra/hydra.yaml", hydra_yaml(sc, hydra), op="put")
        plan.add(0.9, "driver", f"{hydra}/.hydra/overrides.yaml", "".join(f"- {o}\n" for o in expanded(sc, resume)), op="put")
        plan.add(0.9, "driver", f"{hydra}/main_ppo.log", b"")
        if sc.attempt == 1:
            plan.add(0.5, "driver", SCRIPT, launch_script(sc), op="put")
            if custom_reward(sc):
                plan.add(0.5, "driver", REWARD_FN, reward_fn_source(), op="put")
        if sc.kind == "hydra-error" and sc.ends_early:
            return 9.0
        r = stream(sc.seed, "verl-boot", sc.attempt)
        t = 14.0 + 6.0 * r.random()
        self.wk(t, "NCCL version 2.21.5+cuda12.4")
        if sc.n_gpus > 1:
            self.say(t + 0.01, ray_lines(DEDUP_NOTE, "WorkerDict", self.workers[1], sc.ansi))
        self.wk(
            t + 3.0,
            'Model config after override: Qwen2Config {\n  "architectures": [\n    "Qwen2ForCausalLM"\n  ],\n'
            '  "torch_dtype": "bfloat16",\n  "transformers_version": "4.56.1",\n  "vocab_size": 151936\n}\n',
            all_ranks=False,
        )
        self.wk(t + 5.0, f"Qwen2ForCausalLM contains {0.49:.2f}B parameters", all_ranks=False)
        self.wk(
            t + 5.5,
            f"{crashtext.PY}/torch/distributed/fsdp/_init_utils.py:444: UserWarning: FSDP is switching to use "
            "`NO_SHARD` instead of ShardingStrategy.FULL_SHARD since the world size is 1.\n  warnings.warn(",
        )
        self.wk(t + 6.0, f"Total steps: {sc.max_steps}, num_warmup_steps: 0")
        self.wk(t + 6.2, "Actor use_remove_padding=True")
        self.wk(t + 6.3, "Actor use_fused_kernels=False")
        stamp = clock.local(t + 20).strftime("%m-%d %H:%M:%S")
        self.wk(
            t + 20,
            f"WARNING {stamp} [cuda.py:93] To see benefits of async output processing, enable CUDA graph. Since, "
            "enforce-eager is enabled, async output processor cannot be used",
        )
        if sc.profile == "alarming":
            self.wk(
                t + 21,
                f"WARNING {stamp} [utils.py:2522] Methods determine_num_available_blocks,device_config,"
                f"get_cache_block_size_bytes,initialize_cache not implemented in <vllm.v1.worker.gpu_worker.Worker object "
                f"at {crashtext.addr(sc.seed, 'gpuworker')}>",
            )
            self.wk(
                t + 21.5,
                f"{crashtext.PY}/torch/distributed/fsdp/fully_sharded_data_parallel.py:690: FutureWarning: "
                "FSDP.state_dict_type() and FSDP.set_state_dict_type() are being deprecated. Please use APIs, "
                "get_state_dict() and set_state_dict(), which can support different parallelisms, FSDP1, FSDP2, DDP.\n"
                "  warnings.warn(",
            )
        t += 24.0
        tracker = self.abs_path(f"{ckpt_dir(sc)}/latest_checkpointed_iteration.txt")
        if resume:
            folder = self.abs_path(f"{ckpt_dir(sc)}/global_step_{sc.resume_step}")
            self.tr(t, f"Load from checkpoint folder: {folder}\nSetting global step to {sc.resume_step}\nResuming from {folder}")
            t += 9.0
        else:
            self.tr(t, f"Checkpoint tracker file does not exist: {tracker}\nTraining from scratch")
        return t + 1.0

    def validate_first(self, t: float) -> float:
        """val_before_train: a validation pass logged at step `global_steps` (0, or the resumed step)."""
        sc = self.sc
        step0 = sc.first_step - 1
        num0 = self.num.at(max(step0, 1))
        meta = (
            "{'eos_token_id': 151645, 'pad_token_id': 151643, 'recompute_log_prob': False, 'do_sample': False, "
            f"'validate': True, 'global_steps': {step0}}}"
        )
        self.tr(t + 0.5, f"test_gen_batch meta info: {meta}")
        t += 16.0
        self.tr(t, "validation generation end")
        s = samples(sc, num0, 1, "val")[0]
        self.tr(t + 0.2, f"[prompt] {s.prompt}\n[response] {s.completion}\n[ground_truth] {s.answer}\n[score] {float(s.correct)}")
        val = _val_metrics(sc, num0)
        bar = tqdm_meter(step0, sc.max_steps, 0.0, "Training Progress")
        self.say(t + 1.0, bar + "\n")
        text = pprint.pformat(f"Initial validation metrics: {dict((k, v) for k, v, _ in val)}")
        self.tr(t + 1.1, text)
        line = step_line(step0, val, sc.style)
        self.ray(t + 1.2, "TaskRunner", self.taskrunner, line)
        self.plan.add(t + 1.2, "taskrunner", file_logger_path(sc), _jsonl(step0, val))
        self.plan.rows.append((step0, "val", {key: value for key, value, _ in val}))
        return t + 2.0

    def dump(self, t: float, num: StepNumbers) -> None:
        sc = self.sc
        rows = []
        for s in samples(sc, num, sc.batch):
            score = 1.0 if s.correct else 0.0
            if s.kind == "hacked":
                score = 1.0  # the lenient train reward accepts the list of guesses
            row: dict = {"input": s.prompt, "output": s.completion, "gts": s.answer, "score": score, "step": num.n}
            if custom_reward(sc):
                row["acc"] = s.correct
                row["format"] = 1.0 if "####" in s.completion else 0.0
            rows.append(json.dumps(row, ensure_ascii=False))
        path = f"{ROLLOUTS}/{num.n}.jsonl"
        self.plan.add(t, "taskrunner", path, "\n".join(rows) + "\n", op="put")
        self.tr(t + 0.01, f"Dumped generations to {path}")

    def save(self, t: float, n: int) -> None:
        sc, plan = self.sc, self.plan
        base = f"{ckpt_dir(sc)}/global_step_{n}"
        self.tr(t - 6.0, f"local_global_step_folder: {self.abs_path(ckpt_dir(sc))}/global_step_{n}")
        w = sc.n_gpus
        for rank in range(w):
            owner = f"worker{rank}"
            for part in ("model", "optim", "extra_state"):
                plan.add(t - 4.0 + 0.1 * rank, owner, f"{base}/actor/{part}_world_size_{w}_rank_{rank}.pt", PLACEHOLDER, op="put")
        cfg = {"FSDP_version": 1, "world_size": w}
        plan.add(t - 3.5, "worker0", f"{base}/actor/fsdp_config.json", json.dumps(cfg, indent=4), op="put")
        plan.add(t - 3.4, "worker0", f"{base}/actor/huggingface/config.json", hf_config(), op="put")
        plan.add(
            t - 3.4, "worker0", f"{base}/actor/huggingface/generation_config.json", '{\n  "bos_token_id": 151643\n}\n', op="put"
        )
        plan.add(t - 1.0, "taskrunner", f"{base}/data.pt", PLACEHOLDER, op="put")
        plan.add(t - 0.9, "taskrunner", f"{ckpt_dir(sc)}/latest_checkpointed_iteration.txt", str(n), op="put")

    def crash(self, t: float) -> Plan:
        sc, plan = self.sc, self.plan
        kind = sc.kind
        step_start = t
        offsets = {"crash-oom": 0.75, "actor-died": 0.3, "host-oom": 0.4, "engine-dead": 0.2, "reward-fn-error": 0.4}
        t_fail = step_start + offsets.get(kind, 0.0) * sc.step_time_s
        worker = self.workers[-1]
        pids = {"taskrunner": self.taskrunner, "worker": worker, "agentloop": pid_of(sc, "agentloop")}
        failing, code = "taskrunner", 1
        if kind == "actor-died":
            failing, code = f"worker{sc.n_gpus - 1}", -9
            self.say(t_fail + 1.0, _raylet(sc, crashtext.raylet_worker_died(sc.seed, worker, self.ip)))
        elif kind == "host-oom":
            failing, code = f"worker{sc.n_gpus - 1}", -9
            when = self.clock.local(t_fail + 0.5)
            self.say(
                t_fail + 0.5,
                _raylet(
                    sc,
                    f"[{when:%Y-%m-%d %H:%M:%S},{when.microsecond // 1000:03d} E {self.driver + 31} "
                    f"{self.driver + 31}] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) killed due to memory "
                    "pressure (OOM), 0 Workers crashed due to other reasons at node "
                    f"(ID: {crashtext.hexid(sc.seed, 'node', 56)}, "
                    f"IP: {self.ip}) over the last time period. To see more information about the Workers killed on this "
                    "node, use "
                    f"`ray logs raylet.out -ip {self.ip}`",
                ),
            )
        elif kind == "engine-dead":
            stamp = self.clock.local(t_fail).strftime("%m-%d %H:%M:%S")
            server = pid_of(sc, "vllmserver")
            self.say(t_fail, ray_lines("\n".join(crashtext.vllm_engine_core_error(stamp)), "vLLMHttpServer", server, sc.ansi))
        elif kind == "crash-oom":
            failing = f"worker{sc.n_gpus - 1}"
        paths = {"train_files": "/root/data/gsm8k/train.parquet", "reward_fn": self.abs_path(REWARD_FN)}
        text = crashtext.verl_crash(kind, sc.seed, expanded(sc, sc.attempt > 1), pids, self.ip, paths)
        self.say(t_fail + 2.5, text)
        plan.failing, plan.failing_code, plan.fail_time = failing, code, t_fail
        plan.end, plan.exit_code = t_fail + 3.5, 1
        return plan


def _raylet(sc: FrameworkScenario, text: str) -> str:
    label = "(raylet)"
    return (f"\x1b[2m\x1b[36m{label}\x1b[0m " if sc.ansi else f"{label} ") + text + "\n"


def _jsonl(n: int, metrics: list[Metric]) -> bytes:
    data = {key: value for key, value, _ in metrics}
    return orjson.dumps({"step": n, "data": data}) + b"\n"


def verl_plan(sc: FrameworkScenario, rate: float = 1.0) -> Plan:
    return VerlRun(sc, rate).build()


def resume_point(root, sc: FrameworkScenario) -> int | None:
    """`find_latest_ckpt_path`: the tracker's step, if its folder exists."""
    tracker = root / ckpt_dir(sc) / "latest_checkpointed_iteration.txt"
    if not tracker.is_file():
        return None
    text = tracker.read_text().strip()
    if not text.isdigit() or not (root / ckpt_dir(sc) / f"global_step_{text}").is_dir():
        return None
    return int(text)
