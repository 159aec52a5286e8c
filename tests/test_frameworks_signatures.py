"""signatures.py: crash and warning signatures, line numbers, torchrun root cause, reward-function errors."""

from __future__ import annotations

from rlagent.tools.frameworks.signatures import SIGNATURES, findings, scan, scan_text


def ids(matches):
    return [(m.signature, m.finding, m.lineno) for m in matches]


def test_ray_actor_death_as_frameworks_md_quotes_it():
    text = "\n".join(
        [
            "(TaskRunner pid=221183) step:12 - critic/score/mean:0.43",
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
            "\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict",
            "\tactor_id: 8b1e",
            "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker "
            "unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. (1) The "
            "process is killed by SIGKILL by OOM killer due to high memory usage.",
        ]
    )
    matches = scan_text(text)
    assert ids(matches) == [("ray_actor_died", "run_crashed", 2)]
    assert matches[0].fatal


def test_ray_task_error_with_cuda_oom_cause():
    text = "\n".join(
        [
            "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_update_actor() "
            "(pid=1234, ip=10.0.0.2, actor_id=ab, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f>)",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 320.00 MiB. GPU 0 has a total capacity of 79.11 GiB "
            "of which 177.38 MiB is free.",
            "RuntimeError: CUDA error: out of memory",
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)",
        ]
    )
    matches = scan_text(text)
    assert ids(matches) == [
        ("ray_task_error", "run_crashed", 1),
        ("cuda_oom", "cuda_oom", 2),
        ("cuda_oom", "cuda_oom", 3),
        ("cuda_oom", "cuda_oom", 4),
    ]
    assert matches[0].details == {"cause": "OutOfMemoryError", "call": "WorkerDict.actor_rollout_update_actor"}
    assert matches[1].details == {"alloc": "320.00 MiB"}


def test_ray_host_oom_and_job_failure():
    text = "\n".join(
        [
            "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
            "(raylet) 2 worker(s) were killed due to the node running low on memory.",
            "Job 'raysubmit_Ab12Cd34' failed",
            "Status message: Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):",
        ]
    )
    matches = scan_text(text)
    assert ids(matches) == [
        ("ray_host_oom", "host_oom", 1),
        ("ray_host_oom", "host_oom", 2),
        ("ray_job_failed", "run_crashed", 3),
        ("ray_job_failed", "run_crashed", 4),
    ]
    assert matches[2].details == {"job": "raysubmit_Ab12Cd34"} and matches[3].details == {"exitcode": "1"}


def test_nccl_watchdog_sequence():
    text = "\n".join(
        [
            "[rank0]:[E1218 20:27:21.426 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds "
            "before timing out.",
            "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU "
            "operations might run on corrupted/incomplete data.",
            "To avoid data inconsistency, we are taking the entire process down.",
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, remote "
            "process exited or there was a network error, NCCL version 2.21.5 ncclRemoteError",
        ]
    )
    assert ids(scan_text(text)) == [
        ("nccl_timeout", "nccl_error", 1),
        ("nccl_timeout", "nccl_error", 2),
        ("nccl_error", "nccl_error", 4),
        ("nccl_error", "nccl_error", 5),
    ]


CHILD_FAILED = """\
Traceback (most recent call last):
  File "/usr/local/bin/accelerate", line 8, in <module>
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train_grpo.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-06-08_19:04:45
  host      : node-a
  rank      : 2 (local_rank: 2)
  exitcode  : 1 (pid: 102932)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-06-08_19:04:44
  host      : node-a
  rank      : 3 (local_rank: 3)
  exitcode  : -9 (pid: 102933)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 102933
============================================================
"""


def test_each_nccl_alternative_alone():
    for line in (
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
        "x ncclRemoteError y",
        "NCCL communicator was aborted on rank 3.",
    ):
        assert ids(scan_text(line)) == [("nccl_error", "nccl_error", 1)], line


def test_each_needle_alternative_alone():
    cases = {
        "(raylet) 1 worker(s) were killed due to the node running low on memory.": "ray_host_oom",
        "terminate called after throwing an instance of 'c10::DistBackendError'": "nccl_error",
        "Killed": "killed",
        "Orchestrator finished.": "run_finished",
        "RL trainer finished!": "run_finished",
        "Error: Trainer failed with exit code 137": "prime_rl_failed",
    }
    for line, signature in cases.items():
        assert [m.signature for m in scan_text(line)] == [signature], line


def test_child_failed_error_names_the_root_cause_rank():
    matches = scan_text(CHILD_FAILED)
    child = [m for m in matches if m.signature == "child_failed"]
    assert len(child) == 1 and child[0].lineno == 4 and child[0].finding == "run_crashed"
    assert child[0].details == {
        "time": "2026-06-08_19:04:44",
        "host": "node-a",
        "rank": "3",
        "local_rank": "3",
        "exitcode": "-9",
        "pid": "102933",
        "error_file": "<N/A>",
        "traceback": "Signal 9 (SIGKILL) received by PID 102933",
    }
    # exitcode -9 / SIGKILL of the root cause also says host OOM (findings.md host_oom)
    assert ("sigkill", "host_oom", 22) in ids(matches) and ("sigkill", "host_oom", 24) in ids(matches)


def test_vllm_engine_dead_vs_benign_shutdown():
    dead = "\n".join(
        [
            "ERROR 08-13 19:25:45 [core.py:700] EngineCore encountered a fatal error.",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
            "See stack trace (above) for the root cause.",
            "ray.exceptions.RayTaskError(EngineDeadError): ray::AgentLoopWorker.generate_sequences() (pid=9, ip=10.0.0.1)",
        ]
    )
    assert ids(scan_text(dead)) == [
        ("vllm_engine_dead", "inference_crashed", 2),
        ("ray_task_error", "run_crashed", 3),
        ("vllm_engine_dead", "inference_crashed", 3),
    ]
    benign = "INFO 08-13 19:25:45 [core_client.py:500] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client."
    matches = scan_text(benign)
    assert ids(matches) == [("vllm_engine_proc_died", None, 1)] and not matches[0].fatal
    assert findings(matches) == {}


def test_hydra_killed_deepspeed_and_trl_vllm_client():
    text = "\n".join(
        [
            "Error executing job with overrides: ['algorithm.adv_estimator=grpo', 'trainer.n_gpus_per_node=8']",
            "Killed",
            "./run_grpo.sh: line 12: 48211 Killed                  python3 -m verl.trainer.main_ppo",
            "[2026-08-13 19:25:45,000] [ERROR] [launch.py:341:sigkill_handler] ['python', 'train.py'] "
            "exits with return code = -9",
            "ConnectionError: The vLLM server can't be reached at http://0.0.0.0:8000 after 240 seconds.",
            "Server is not up yet. Retrying in 2.0 seconds...",
        ]
    )
    assert ids(scan_text(text)) == [
        ("hydra_error", "run_crashed", 1),
        ("killed", "host_oom", 2),
        ("killed", "host_oom", 3),
        ("deepspeed_exit", "run_crashed", 4),
        ("vllm_server_unreachable", "inference_unreachable", 5),
        ("vllm_server_not_up", None, 6),
    ]


def test_prime_rl_lines():
    text = "\n".join(
        [
            "14:09:44   ERROR Fatal error in run_orchestrator",
            "Error: Orchestrator failed with exit code 1",
            "14:10:00 WARNING Dropping 2 non-finite value(s) from metrics.jsonl: loss/mean",
            "14:20:00 SUCCESS Training finished!",
        ]
    )
    matches = scan_text(text)
    assert ids(matches) == [
        ("prime_rl_fatal", "run_crashed", 1),
        ("prime_rl_failed", "run_crashed", 2),
        ("prime_rl_nonfinite", "nan_detected", 3),
        ("run_finished", "run_finished", 4),
    ]
    assert matches[1].details == {"process": "Orchestrator", "exitcode": "1"}


VERL_REWARD_TRACEBACK = """\
(TaskRunner pid=42) Traceback (most recent call last):
(TaskRunner pid=42)   File "/opt/verl/verl/trainer/ppo/ray_trainer.py", line 1420, in fit
(TaskRunner pid=42)     reward_tensor = self.reward_fn(batch)
(TaskRunner pid=42)   File "/opt/verl/verl/workers/reward_manager/naive.py", line 85, in __call__
(TaskRunner pid=42)     score = self.compute_score(
(TaskRunner pid=42)   File "/work/my_reward.py", line 12, in compute_score
(TaskRunner pid=42)     return correct / total
(TaskRunner pid=42)            ~~~~~~~~^~~~~~~
(TaskRunner pid=42) ZeroDivisionError: division by zero
"""

TRL_REWARD_TRACEBACK = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/opt/trl/trl/trainer/grpo_trainer.py", line 1659, in _calculate_rewards
[rank0]:     output_reward_func = reward_func(
[rank0]:   File "/work/rewards.py", line 3, in accuracy_reward
[rank0]:     return [float(s["answer"] == c) for s, c in zip(solutions, completions)]
[rank0]: KeyError: 'answer'
"""

OTHER_TRACEBACK = """\
Traceback (most recent call last):
  File "/opt/verl/verl/workers/fsdp_workers.py", line 700, in update_actor
    raise ValueError("bad batch")
ValueError: bad batch
"""


def test_reward_function_errors():
    verl_matches = [m for m in scan_text(VERL_REWARD_TRACEBACK) if m.finding == "reward_fn_error"]
    assert [(m.lineno, m.text) for m in verl_matches] == [(9, "ZeroDivisionError: division by zero")]
    assert verl_matches[0].details["func"] == "compute_score"
    trl_matches = [m for m in scan_text(TRL_REWARD_TRACEBACK) if m.finding == "reward_fn_error"]
    assert [(m.lineno, m.details["func"]) for m in trl_matches] == [(6, "_calculate_rewards")]
    assert scan_text(OTHER_TRACEBACK) == []
    # a reward frame whose exception line is not recognised does not claim a later, unrelated traceback
    unrecognised = VERL_REWARD_TRACEBACK.replace("ZeroDivisionError: division by zero", "KeyboardInterrupt")
    assert scan_text(unrecognised + OTHER_TRACEBACK) == []


def test_benign_lines_and_junk_do_not_match():
    text = "\n".join(
        [
            "No NVLink detected, disabling NCCL P2P and SHM transports.",
            "(Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication)",
            "step:12 - critic/score/mean:0.43 - timing_s/step:80.2",
            "{'loss': 0.0, 'grad_norm': 0.1, 'learning_rate': 1e-06, 'kl': nan}",
            "\x00\xff" * 100,
        ]
    )
    assert scan_text(text) == []


def test_plain_strings_are_numbered_from_one():
    assert ids(scan(["ok", "Killed"])) == [("killed", "host_oom", 2)]


def test_every_signature_has_a_known_finding_or_none():
    from rlagent.agents.rules.catalogue import CATALOGUE

    known = {*CATALOGUE, None}  # the catalogue holds findings.md's ids, the five new ones included
    assert {signature.finding for signature in SIGNATURES} <= known
