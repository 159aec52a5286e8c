"""SIMULATED crash output of verl, TRL and OpenRLHF: the tracebacks and launcher blocks of frameworks.md
section 4, with paths, line numbers and messages as the real stacks print them (Ray `RayTaskError(...)`
chains and `ActorDiedError`, Ray's memory monitor, Hydra's `Error executing job with overrides`, torch
elastic's `ChildFailedError` with its root-cause rank, NCCL's watchdog, vLLM's `EngineDeadError`,
DeepSpeed's loss-scale exception). Addresses, ids and pids are deterministic functions of the seed.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

PY = "/usr/local/lib/python3.10/dist-packages"
"""site-packages of the simulated images (verl's and OpenRLHF's docker images use Python 3.10)."""
PY_TRL = "/opt/conda/lib/python3.11/site-packages"


def hexid(seed: object, what: str, n: int = 32) -> str:
    return hashlib.sha256(f"{seed}:{what}".encode()).hexdigest()[:n]


def addr(seed: object, what: str) -> str:
    return "0x7f" + hexid(seed, what, 10)


def cuda_oom(seed: object, gpu: int = 0, total: float = 79.25) -> str:
    h = int(hexid(seed, "oom", 8), 16)
    alloc = 1.5 + (h % 400) / 100
    free = 120 + (h % 9000) / 10
    used = total - free / 1024
    torch_alloc = used - 4.6
    return (
        f"CUDA out of memory. Tried to allocate {alloc:.2f} GiB. GPU {gpu} has a total capacity of {total:.2f} GiB of which "
        f"{free:.2f} MiB is free. Process {20000 + h % 90000} has {used:.2f} GiB memory in use. Of the allocated memory "
        f"{torch_alloc:.2f} GiB is allocated by PyTorch, and {used - torch_alloc - 0.9:.2f} GiB is reserved by PyTorch but "
        "unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "to avoid fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


ENGINE_DEAD = (
    "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."
)


def _ray_get_frames(py: str) -> str:
    return (
        f'  File "{py}/ray/_private/auto_init_hook.py", line 22, in auto_init_wrapper\n'
        "    return fn(*args, **kwargs)\n"
        f'  File "{py}/ray/_private/client_mode_hook.py", line 104, in wrapper\n'
        "    return func(*args, **kwargs)\n"
        f'  File "{py}/ray/_private/worker.py", line 2858, in get\n'
        "    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)\n"
        f'  File "{py}/ray/_private/worker.py", line 958, in get_objects\n'
        "    raise value.as_instanceof_cause()\n"
    )


def ray_task_head(seed: object, cause: str, call: str, pid: int, ip: str, repr_: str) -> str:
    """`ray.exceptions.RayTaskError(Cause): ray::Actor.method() (pid=..., ip=..., actor_id=..., repr=<...>)`."""
    head = "ray.exceptions.RayTaskError" + (f"({cause})" if cause else "")
    actor_id = hexid(seed, f"actor:{call}")
    return f"{head}: ray::{call}() (pid={pid}, ip={ip}, actor_id={actor_id}, repr=<{repr_} object at {addr(seed, call)}>)\n"


# ---- verl ------------------------------------------------------------------------------------------

VERL = "/workspace/verl/verl"


def hydra_banner(overrides: list[str]) -> str:
    return f"Error executing job with overrides: {overrides!r}\n"


def hydra_tail() -> str:
    return "\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"


def _verl_driver_frames() -> str:
    return (
        "Traceback (most recent call last):\n"
        f'  File "{VERL}/trainer/main_ppo.py", line 45, in main\n'
        "    run_ppo(config)\n"
        f'  File "{VERL}/trainer/main_ppo.py", line 99, in run_ppo\n'
        "    ray.get(runner.run.remote(config))\n" + _ray_get_frames(PY)
    )


def _verl_taskrunner(seed: object, cause: str, pid: int, ip: str) -> str:
    return ray_task_head(seed, cause, "TaskRunner.run", pid, ip, "main_ppo.TaskRunner") + (
        f'  File "{VERL}/trainer/main_ppo.py", line 338, in run\n    trainer.fit()\n'
    )


def _worker_call(seed: object, cause: str, method: str, pid: int, ip: str) -> str:
    return f'  File "{VERL}/single_controller/ray/base.py", line 48, in __call__\n    output = ray.get(output)\n' + ray_task_head(
        seed, cause, f"WorkerDict.{method}", pid, ip, "verl.single_controller.ray.base.WorkerDict"
    )


def verl_crash(kind: str, seed: object, overrides: list[str], pids: dict[str, int], ip: str, paths: dict[str, str]) -> str:
    """What the verl driver prints when the run dies of `kind` (after any worker-side lines)."""
    tr, worker = pids["taskrunner"], pids["worker"]
    body = ""
    if kind == "crash-oom":
        body = (
            _verl_taskrunner(seed, "OutOfMemoryError", tr, ip)
            + f'  File "{VERL}/trainer/ppo/ray_trainer.py", line 1607, in fit\n'
            "    actor_output = self._update_actor(batch)\n"
            f'  File "{VERL}/trainer/ppo/ray_trainer.py", line 1281, in _update_actor\n'
            "    actor_output = self.actor_rollout_wg.update_actor(batch)\n"
            + _worker_call(seed, "OutOfMemoryError", "actor_rollout_update_actor", worker, ip)
            + f'  File "{VERL}/single_controller/ray/base.py", line 841, in func\n'
            "    return getattr(self.worker_dict[key], name)(*args, **kwargs)\n"
            f'  File "{VERL}/single_controller/base/decorator.py", line 462, in inner\n'
            "    return func(*args, **kwargs)\n"
            f'  File "{VERL}/workers/fsdp_workers.py", line 903, in update_actor\n'
            "    metrics = self.actor.update_policy(data=data)\n"
            f'  File "{VERL}/workers/actor/dp_actor.py", line 552, in update_policy\n'
            "    loss.backward()\n"
            f'  File "{PY}/torch/_tensor.py", line 648, in backward\n'
            "    torch.autograd.backward(\n"
            f'  File "{PY}/torch/autograd/__init__.py", line 353, in backward\n'
            "    _engine_run_backward(\n"
            f'  File "{PY}/torch/autograd/graph.py", line 824, in _engine_run_backward\n'
            "    return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass\n"
            f"torch.OutOfMemoryError: {cuda_oom(seed)}\n"
        )
    elif kind in ("actor-died", "host-oom"):
        cause = "ActorDiedError" if kind == "actor-died" else "OutOfMemoryError"
        body = (
            _verl_taskrunner(seed, cause, tr, ip) + f'  File "{VERL}/trainer/ppo/ray_trainer.py", line 1393, in fit\n'
            "    gen_batch_output = self.actor_rollout_wg.generate_sequences(gen_batch_output)\n"
            f'  File "{VERL}/single_controller/ray/base.py", line 48, in __call__\n'
            "    output = ray.get(output)\n"
        )
        if kind == "actor-died":
            body += actor_died(seed, worker, ip, "create_colocated_worker_cls.<locals>.WorkerDict")
        else:
            body += ray_memory_kill(seed, worker, ip, "WorkerDict.actor_rollout_generate_sequences")
    elif kind == "hydra-error":
        body = (
            _verl_taskrunner(seed, "FileNotFoundError", tr, ip).replace(
                "line 338, in run\n    trainer.fit()", "line 312, in run\n    train_dataset = create_rl_dataset("
            )
            + f'  File "{VERL}/trainer/main_ppo.py", line 421, in create_rl_dataset\n'
            "    dataset = dataset_cls(\n"
            f'  File "{VERL}/utils/dataset/rl_dataset.py", line 141, in __init__\n'
            "    self._read_files_and_tokenize()\n"
            f'  File "{VERL}/utils/dataset/rl_dataset.py", line 155, in _read_files_and_tokenize\n'
            '    dataframe = datasets.load_dataset("parquet", data_files=parquet_file)["train"]\n'
            f'  File "{PY}/datasets/load.py", line 2062, in load_dataset\n'
            "    builder_instance = load_dataset_builder(\n"
            f'  File "{PY}/datasets/data_files.py", line 353, in resolve_pattern\n'
            "    raise FileNotFoundError(error_msg)\n"
            f"FileNotFoundError: Unable to find '{paths['train_files']}'\n"
        )
    elif kind == "engine-dead":
        agent = pids.get("agentloop", worker)
        body = (
            _verl_taskrunner(seed, "EngineDeadError", tr, ip) + f'  File "{VERL}/trainer/ppo/ray_trainer.py", line 1396, in fit\n'
            "    gen_batch_output = self.async_rollout_manager.generate_sequences(gen_batch_output)\n"
            f'  File "{VERL}/experimental/agent_loop/agent_loop.py", line 912, in generate_sequences\n'
            "    outputs = ray.get(\n"
            + ray_task_head(
                seed,
                "EngineDeadError",
                "AgentLoopWorker.generate_sequences",
                agent,
                ip,
                "verl.experimental.agent_loop.agent_loop.AgentLoopWorker",
            )
            + f'  File "{VERL}/experimental/agent_loop/agent_loop.py", line 386, in generate_sequences\n'
            "    outputs = await asyncio.gather(*tasks)\n"
            f'  File "{VERL}/experimental/agent_loop/agent_loop.py", line 421, in _run_agent_loop\n'
            "    output: AgentLoopOutput = await agent_loop.run(sampling_params, **kwargs)\n"
            f'  File "{VERL}/workers/rollout/vllm_rollout/vllm_async_server.py", line 455, in generate\n'
            "    async for output in generator:\n"
            f'  File "{PY}/vllm/v1/engine/async_llm.py", line 345, in generate\n'
            "    out = q.get_nowait() or await q.get()\n"
            f'  File "{PY}/vllm/v1/engine/output_processor.py", line 59, in get\n'
            "    raise output\n"
            f"{ENGINE_DEAD}\n"
        )
    elif kind == "reward-fn-error":
        body = (
            _verl_taskrunner(seed, "ValueError", tr, ip) + f'  File "{VERL}/trainer/ppo/ray_trainer.py", line 1469, in fit\n'
            "    reward_tensor, reward_extra_infos_dict = compute_reward(batch, self.reward_fn)\n"
            f'  File "{VERL}/trainer/ppo/reward.py", line 158, in compute_reward\n'
            "    reward_result = reward_fn(data, return_dict=True)\n"
            f'  File "{VERL}/workers/reward_manager/naive.py", line 89, in __call__\n'
            "    score = self.compute_score(\n"
            f'  File "{paths["reward_fn"]}", line 23, in compute_score\n'
            '    return float(float(solution_str.split("####")[-1].strip()) == float(ground_truth))\n'
            "ValueError: could not convert string to float: '19 apples'\n"
        )
    return hydra_banner(overrides) + _verl_driver_frames() + body + hydra_tail()


def actor_died(seed: object, pid: int, ip: str, class_name: str) -> str:
    return (
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
        f"\tclass_name: {class_name}\n"
        f"\tactor_id: {hexid(seed, 'died')}\n"
        f"\tpid: {pid}\n"
        f"\tname: {hexid(seed, 'wg', 6)}WorkerDict_0:1\n"
        f"\tnamespace: {hexid(seed, 'ns', 8)}-{hexid(seed, 'ns2', 4)}-{hexid(seed, 'ns3', 4)}-{hexid(seed, 'ns4', 4)}-"
        f"{hexid(seed, 'ns5', 12)}\n"
        f"\tip: {ip}\n"
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker "
        "unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. (1) The process "
        "is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. (3) The worker is "
        "crashed unexpectedly due to SIGSEGV or other unexpected errors.\n"
    )


def raylet_worker_died(seed: object, pid: int, ip: str) -> str:
    """What the raylet prints on the driver (prefix `(raylet)`) when a worker dies mid-task."""
    return (
        "A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, "
        f"check the logs for the dead worker. RayTask ID: {hexid(seed, 'task', 48)} Worker ID: {hexid(seed, 'wid', 56)} "
        f"Node ID: {hexid(seed, 'node', 56)} Worker IP address: {ip} Worker port: 10043 Worker PID: {pid} Worker exit type: "
        "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. There are "
        "some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop "
        "--force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors."
    )


def ray_memory_kill(seed: object, pid: int, ip: str, task: str) -> str:
    node = hexid(seed, "node", 56)
    return (
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
        f"Memory on the node (IP: {ip}, ID: {node}) where the task (actor ID: {hexid(seed, 'oomactor')}, "
        f"name={task}, pid={pid}, memory used=61.27GB) was running was 239.12GB / 251.44GB (0.951), which exceeds the memory "
        f"usage threshold of 0.95. Ray killed this worker (ID: {hexid(seed, 'wid', 56)}) because it was the most recently "
        f"scheduled task; to see more information about memory usage on this node, use `ray logs raylet.out -ip {ip}`. To see "
        f"the logs of the worker, use `ray logs worker-{hexid(seed, 'wid', 56)}*out -ip {ip}. Top 10 memory users:\n"
        "PID\tMEM(GB)\tCOMMAND\n"
        f"{pid}\t61.27\tray::WorkerDict.actor_rollout_generate_sequences\n"
        f"{pid + 1}\t58.90\tray::WorkerDict\n"
        f"{pid - 412}\t9.31\tray::TaskRunner.run\n"
        "Refer to the documentation on how to address the out of memory issue: "
        "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on this "
        "node or reducing task parallelism by requesting more CPUs per task. To adjust the kill threshold, set the environment "
        "variable `RAY_memory_usage_threshold` when starting Ray. To disable worker killing, set the environment variable "
        "`RAY_memory_monitor_refresh_ms` to zero.\n"
    )


def vllm_engine_core_error(stamp: str) -> list[str]:
    """vLLM v1's EngineCore dying (printed by the server actor that hosts it), before EngineDeadError."""
    return [
        f"ERROR {stamp} [core.py:710] EngineCore encountered a fatal error.",
        f"ERROR {stamp} [core.py:710] Traceback (most recent call last):",
        f'ERROR {stamp} [core.py:710]   File "{PY}/vllm/v1/engine/core.py", line 701, in run_engine_core',
        f"ERROR {stamp} [core.py:710]     engine_core.run_busy_loop()",
        f'ERROR {stamp} [core.py:710]   File "{PY}/vllm/v1/engine/core.py", line 728, in run_busy_loop',
        f"ERROR {stamp} [core.py:710]     self._process_engine_step()",
        f'ERROR {stamp} [core.py:710]   File "{PY}/vllm/v1/worker/gpu_model_runner.py", line 1588, in execute_model',
        f"ERROR {stamp} [core.py:710]     valid_sampled_token_ids = sampled_token_ids.tolist()",
        f"ERROR {stamp} [core.py:710] RuntimeError: CUDA error: an illegal memory access was encountered",
        f"ERROR {stamp} [core.py:710] CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.",
        f"ERROR {stamp} [async_llm.py:420] AsyncLLM output_handler failed.",
        f"ERROR {stamp} [async_llm.py:420] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
        "stack trace (above) for the root cause.",
    ]


# ---- TRL (accelerate launch / torchrun) ----------------------------------------------------------


def glog(letter: str, when: datetime, pid: int, where: str) -> str:
    return f"{letter}{when:%m%d %H:%M:%S}.{when.microsecond:06d} {pid} {where}] "


def trl_traceback(kind: str, rank: int, script: str) -> str:
    """The `[rankN]:`-prefixed traceback a GRPO rank prints (torch's excepthook adds the prefix)."""
    tr = f"{PY_TRL}/transformers/trainer.py"
    grpo = f"{PY_TRL}/trl/trainer/grpo_trainer.py"
    lines = [
        "Traceback (most recent call last):",
        f'  File "{script}", line 96, in <module>',
        "    main(script_args, training_args, model_args)",
        f'  File "{script}", line 88, in main',
        "    train_result = trainer.train(resume_from_checkpoint=checkpoint)",
        "                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{tr}", line 2325, in train',
        "    return inner_training_loop(",
        "           ^^^^^^^^^^^^^^^^^^^^",
        f'  File "{tr}", line 2674, in _inner_training_loop',
        "    tr_loss_step = self.training_step(model, inputs, num_items_in_batch)",
        "                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{grpo}", line 1545, in training_step',
        "    output = super().training_step(model, inputs, num_items_in_batch)",
        "             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    ]
    if kind == "crash-oom":
        lines += [
            f'  File "{tr}", line 4020, in training_step',
            "    self.accelerator.backward(loss, **kwargs)",
            f'  File "{PY_TRL}/accelerate/accelerator.py", line 2553, in backward',
            "    loss.backward(**kwargs)",
            f'  File "{PY_TRL}/torch/_tensor.py", line 648, in backward',
            "    torch.autograd.backward(",
            f'  File "{PY_TRL}/torch/autograd/__init__.py", line 353, in backward',
            "    _engine_run_backward(",
            f'  File "{PY_TRL}/torch/autograd/graph.py", line 824, in _engine_run_backward',
            "    return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
            "           " + "^" * 112,
            f"torch.OutOfMemoryError: {cuda_oom(f'trl:{rank}', gpu=rank)}",
        ]
    elif kind == "reward-fn-error":
        lines += [
            f'  File "{tr}", line 3985, in training_step',
            "    inputs = self._prepare_inputs(inputs)",
            "             ^^^^^^^^^^^^^^^^^^^^^^^^^^",
            f'  File "{PY_TRL}/trl/extras/profiling.py", line 98, in wrapper',
            "    return func(self, *args, **kwargs)",
            "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^",
            f'  File "{grpo}", line 1585, in _prepare_inputs',
            "    generation_batch = self._generate_and_score_completions(generation_batch)",
            "                       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
            f'  File "{grpo}", line 2193, in _generate_and_score_completions',
            "    rewards_per_func = self._calculate_rewards(inputs, prompts, completions, completion_ids_list)",
            "                       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
            f'  File "{grpo}", line 1659, in _calculate_rewards',
            "    output_reward_func = reward_func(",
            "                         ^^^^^^^^^^^^",
            f'  File "{script}", line 41, in accuracy_reward',
            '    gold = float(solution.split("####")[-1].strip())',
            "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
            "ValueError: could not convert string to float: '1,080'",
        ]
    return "".join(f"[rank{rank}]: {line}\n" for line in lines)


def nccl_watchdog(when: datetime, rank: int, seq: int, seed: object, timeout_ms: int = 1800000) -> str:
    """c10d's watchdog on a rank whose collective timed out (then std::terminate: SIGABRT)."""
    base = f"{when:%m%d %H:%M:%S}"
    nanos = (when.microsecond * 1000 + int(hexid(seed, "ns", 6), 16)) % 1_000_000_000
    lib = f"{PY_TRL}/torch/lib"
    work = (
        f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)={timeout_ms}) ran for "
        f"{timeout_ms + 13} milliseconds before timing out."
    )
    head = f"[rank{rank}]:[E{base}.{nanos:09d} ProcessGroupNCCL.cpp"
    pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    a = lambda k: addr(seed, f"nccl{k}")  # noqa: E731
    return (
        f"{head}:632] [Rank {rank}] Watchdog caught collective operation timeout: {work}\n"
        f"{head}:2271] {pg}  failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: {seq}, "
        f"last completed work: {seq - 1}\n"
        f"{head}:670] Stack trace of the failed collective not found, potentially because FlightRecorder is disabled. You can "
        "enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.\n"
        f"{head}:684] [Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA "
        "kernels, subsequent GPU operations might run on corrupted/incomplete data.\n"
        f"{head}:698] [Rank {rank}] To avoid data inconsistency, we are taking the entire process down.\n"
        f"{head}:1904] {pg} Process group watchdog thread terminated with exception: [Rank {rank}] Watchdog caught collective "
        f"operation timeout: {work}\n"
        "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:635 (most recent call "
        "first):\n"
        f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 ({a(1)} in {lib}/libc10.so)\n"
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, "
        f"1000l> > >) + 0x282 ({a(2)} in {lib}/libtorch_cuda.so)\n"
        f"frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 ({a(3)} in {lib}/libtorch_cuda.so)\n"
        f"frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x14d ({a(4)} in {lib}/libtorch_cuda.so)\n"
        f"frame #4: <unknown function> + 0xdc253 ({a(5)} in /lib/x86_64-linux-gnu/libstdc++.so.6)\n"
        f"frame #5: <unknown function> + 0x94ac3 ({a(6)} in /lib/x86_64-linux-gnu/libc.so.6)\n"
        f"frame #6: <unknown function> + 0x126850 ({a(7)} in /lib/x86_64-linux-gnu/libc.so.6)\n"
        "\n"
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        f"  what():  {pg} Process group watchdog thread terminated with exception: [Rank {rank}] Watchdog caught collective "
        f"operation timeout: {work}\n"
    )


def accelerate_child_failed(
    script: str, stamp: str, host: str, rank: int, exitcode: int, pid: int, deepspeed: bool = False
) -> str:
    """accelerate launch's own traceback ending in torch elastic's ChildFailedError summary."""
    launcher = "deepspeed_launcher" if deepspeed else "multi_gpu_launcher"
    line = 1185 if deepspeed else 1190
    signals = {-9: "Signal 9 (SIGKILL)", -6: "Signal 6 (SIGABRT)", -11: "Signal 11 (SIGSEGV)"}
    traceback = (
        f"{signals[exitcode]} received by PID {pid}"
        if exitcode in signals
        else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
    )
    return (
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/bin/accelerate", line 8, in <module>\n'
        "    sys.exit(main())\n"
        "             ^^^^^^\n"
        f'  File "{PY_TRL}/accelerate/commands/accelerate_cli.py", line 50, in main\n'
        "    args.func(args)\n"
        f'  File "{PY_TRL}/accelerate/commands/launch.py", line {line}, in launch_command\n'
        f"    {launcher}(args)\n"
        f'  File "{PY_TRL}/accelerate/commands/launch.py", line 866, in {launcher}\n'
        "    distrib_run.run(args)\n"
        f'  File "{PY_TRL}/torch/distributed/run.py", line 909, in run\n'
        "    elastic_launch(\n"
        f'  File "{PY_TRL}/torch/distributed/launcher/api.py", line 138, in __call__\n'
        "    return launch_agent(self._config, self._entrypoint, list(args))\n"
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        f'  File "{PY_TRL}/torch/distributed/launcher/api.py", line 269, in launch_agent\n'
        "    raise ChildFailedError(\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "============================================================\n"
        f"{script} FAILED\n"
        "------------------------------------------------------------\n"
        "Failures:\n"
        "  <NO_OTHER_FAILURES>\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        f"[0]:\n"
        f"  time      : {stamp}\n"
        f"  host      : {host}\n"
        f"  rank      : {rank} (local_rank: {rank})\n"
        f"  exitcode  : {exitcode} (pid: {pid})\n"
        "  error_file: <N/A>\n"
        f"  traceback : {traceback}\n"
        "============================================================\n"
    )


# ---- OpenRLHF ------------------------------------------------------------------------------------

ORLHF = "/openrlhf/openrlhf"


def openrlhf_crash(kind: str, seed: object, pids: dict[str, int], ip: str) -> str:
    """The driver's traceback when `ray.get(ppo_trainer.fit.remote())` raises (train_ppo_ray.train)."""
    head = (
        "Traceback (most recent call last):\n"
        '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
        '  File "<frozen runpy>", line 88, in _run_code\n'
        f'  File "{ORLHF}/cli/train_ppo_ray.py", line 512, in <module>\n'
        "    train(args)\n"
        f'  File "{ORLHF}/cli/train_ppo_ray.py", line 168, in train\n'
        "    ray.get(ppo_trainer.fit.remote())\n" + _ray_get_frames(PY)
    )
    trainer = pids["ppotrainer"]
    causes = {
        "crash-oom": "OutOfMemoryError",
        "deepspeed-error": "Exception",
        "engine-dead": "EngineDeadError",
        "actor-died": "ActorDiedError",
    }
    cause = causes.get(kind, "")
    body = ray_task_head(seed, cause, "PPOTrainer.fit", trainer, ip, "openrlhf.trainer.ppo_trainer.PPOTrainer")
    if kind in ("crash-oom", "deepspeed-error"):
        body += (
            f'  File "{ORLHF}/trainer/ppo_trainer.py", line 538, in fit\n'
            "    status, global_step = self.train_step(rollout_samples, global_step)\n"
            f'  File "{ORLHF}/trainer/ppo_trainer.py", line 243, in train_step\n'
            "    status = self.ppo_train(global_step)\n"
            f'  File "{ORLHF}/trainer/ppo_trainer.py", line 296, in ppo_train\n'
            "    for result in ray.get(refs):\n"
            + ray_task_head(
                seed, cause, "PolicyModelActor.fit", pids["policy"], ip, "openrlhf.trainer.ray.ppo_actor.PolicyModelActor"
            )
            + f'  File "{ORLHF}/trainer/ray/ppo_actor.py", line 601, in fit\n'
            "    status = self.trainer.ppo_train(kl_ctl)\n"
            f'  File "{ORLHF}/trainer/ray/ppo_actor.py", line 195, in ppo_train\n'
            "    status = self.training_step(experience, kl_ctl, step, loss_batch_info)\n"
        )
        if kind == "crash-oom":
            body += (
                f'  File "{ORLHF}/trainer/ray/ppo_actor.py", line 352, in training_step\n'
                "    self.strategy.backward(loss, self.actor, self.actor_optim)\n"
                f'  File "{ORLHF}/utils/deepspeed/deepspeed.py", line 180, in backward\n'
                "    model.backward(loss)\n"
                f'  File "{PY}/deepspeed/utils/nvtx.py", line 20, in wrapped_fn\n'
                "    ret_val = func(*args, **kwargs)\n"
                f'  File "{PY}/deepspeed/runtime/engine.py", line 2298, in backward\n'
                "    self.optimizer.backward(loss, retain_graph=retain_graph)\n"
                f'  File "{PY}/deepspeed/runtime/zero/stage_1_and_2.py", line 2160, in backward\n'
                "    self.loss_scaler.backward(loss.float(), retain_graph=retain_graph)\n"
                f'  File "{PY}/torch/_tensor.py", line 648, in backward\n'
                "    torch.autograd.backward(\n"
                f"torch.OutOfMemoryError: {cuda_oom(seed)}\n"
            )
        else:
            body += (
                f'  File "{ORLHF}/trainer/ray/ppo_actor.py", line 355, in training_step\n'
                '    self.strategy.optimizer_step(self.actor_optim, self.actor, self.actor_scheduler, name="actor")\n'
                f'  File "{ORLHF}/utils/deepspeed/deepspeed.py", line 186, in optimizer_step\n'
                "    model.step()\n"
                f'  File "{PY}/deepspeed/runtime/engine.py", line 2448, in step\n'
                "    self._take_model_step(lr_kwargs)\n"
                f'  File "{PY}/deepspeed/runtime/zero/stage_1_and_2.py", line 1945, in step\n'
                "    self._update_scale(self.overflow)\n"
                f'  File "{PY}/deepspeed/runtime/fp16/loss_scaler.py", line 269, in update_scale\n'
                "    raise Exception(\n"
                "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.\n"
            )
    elif kind == "engine-dead":
        body += (
            f'  File "{ORLHF}/trainer/ppo_trainer.py", line 525, in fit\n'
            "    self.samples_generator.generate_samples(**self.generate_kwargs)\n"
            f'  File "{ORLHF}/trainer/ppo_utils/samples_generator.py", line 165, in generate_samples\n'
            "    self._process_response_into_experience(response, **generate_kwargs) for response in ray.get(ref)\n"
            + ray_task_head(
                seed,
                "EngineDeadError",
                "RolloutRayActor.generate_responses",
                pids["vllm"],
                ip,
                "openrlhf.trainer.ray.vllm_engine.RolloutRayActor",
            )
            + f'  File "{ORLHF}/trainer/ray/vllm_engine.py", line 164, in generate_responses\n'
            "    async for output in self.llm.generate(prompt, sampling_params, request_id):\n"
            f'  File "{PY}/vllm/v1/engine/async_llm.py", line 345, in generate\n'
            "    out = q.get_nowait() or await q.get()\n"
            f'  File "{PY}/vllm/v1/engine/output_processor.py", line 59, in get\n'
            "    raise output\n"
            f"{ENGINE_DEAD}\n"
        )
    elif kind == "actor-died":
        body += (
            f'  File "{ORLHF}/trainer/ppo_trainer.py", line 538, in fit\n'
            "    status, global_step = self.train_step(rollout_samples, global_step)\n"
            f'  File "{ORLHF}/trainer/ppo_trainer.py", line 243, in train_step\n'
            "    status = self.ppo_train(global_step)\n"
            f'  File "{ORLHF}/trainer/ppo_trainer.py", line 296, in ppo_train\n'
            "    for result in ray.get(refs):\n" + actor_died(seed, pids["policy"], ip, "PolicyModelActor")
        )
    return head + body
