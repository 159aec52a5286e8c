"""Crash and warning signatures of the verl / TRL / OpenRLHF / prime-rl stacks, mapped to findings.md ids.

Every pattern is a string frameworks.md section 4 lists (or findings.md names), or one read in the source
cited beside it. `fatal` means the line alone says a process died; `finding` None marks a line that looks
alarming but is not a finding by itself (it is reported so a reader can see it was recognised).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from rlagent.tools.frameworks.lines import LogLine, iter_lines


@dataclass(frozen=True)
class Signature:
    id: str
    finding: str | None
    pattern: re.Pattern[str]
    fatal: bool
    stack: str
    """`ray`, `torch`, `vllm`, `deepspeed`, `hydra`, `verl`, `trl`, `prime-rl`, `shell`."""
    needle: str = ""
    """A substring every match contains, tested first: patterns that do not start with a literal are slow."""


@dataclass
class Match:
    signature: str
    finding: str | None
    lineno: int
    text: str
    fatal: bool
    details: dict[str, str] = field(default_factory=dict)


def _sig(id: str, finding: str | None, pattern: str, fatal: bool, stack: str, needle: str = "") -> Signature:
    return Signature(id, finding, re.compile(pattern), fatal, stack, needle)


SIGNATURES: tuple[Signature, ...] = (
    # Ray (python/ray/exceptions.py; frameworks.md 4)
    _sig("ray_actor_died", "run_crashed", r"ray\.exceptions\.(?:ActorDiedError|RayActorError)\b", True, "ray"),
    _sig("ray_actor_died", "run_crashed", r"The actor died unexpectedly before finishing this task", True, "ray"),
    _sig("ray_task_error", "run_crashed", r"RayTaskError\((?P<cause>\w+)\)(?::\s*ray::(?P<call>[\w.<>]+)\(\))?", True, "ray"),
    _sig("ray_host_oom", "host_oom", r"ray\.exceptions\.OutOfMemoryError\b", True, "ray"),
    _sig(
        "ray_host_oom",
        "host_oom",
        r"(?:Task was|worker\(s\) were) killed due to the node running low on memory",
        True,
        "ray",
        "low on memory",
    ),
    # raylet's memory monitor (src/ray/raylet/node_manager.cc): "N Workers (tasks / actors) killed due to memory pressure (OOM)"
    _sig("ray_host_oom", "host_oom", r"killed due to memory pressure \(OOM\)", True, "ray", "memory pressure"),
    _sig("ray_job_failed", "run_crashed", r"Job '(?P<job>[^']+)' failed", True, "ray"),
    _sig("ray_job_failed", "run_crashed", r"Job entrypoint command failed with exit code (?P<exitcode>-?\d+)", True, "ray"),
    # Hydra (verl driver)
    _sig("hydra_error", "run_crashed", r"Error executing job with overrides:", True, "hydra"),
    # hydra/_internal/config_loader_impl.py: a bad override stops the job before it starts
    _sig("hydra_override", "run_crashed", r"^Could not override '[^']+'\.", True, "hydra", "Could not override"),
    # torch elastic (torchrun / accelerate launch); the root-cause block is parsed by root_cause()
    _sig("child_failed", "run_crashed", r"torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError", True, "torch"),
    _sig("sigkill", "host_oom", r"Signal 9 \(SIGKILL\) received by PID", True, "torch"),
    _sig("sigkill", "host_oom", r"^\s*exitcode\s*:\s*-9\b", True, "torch"),
    # CUDA OOM (c10/cuda/CUDACachingAllocator.cpp)
    _sig("cuda_oom", "cuda_oom", r"CUDA out of memory\.?(?: Tried to allocate (?P<alloc>[\d.]+ [KMGT]?i?B))?", True, "torch"),
    _sig("cuda_oom", "cuda_oom", r"CUDA error: out of memory", True, "torch"),
    # NCCL (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp)
    _sig("nccl_timeout", "nccl_error", r"Watchdog caught collective operation timeout", True, "torch"),
    _sig("nccl_timeout", "nccl_error", r"Some NCCL operations have failed or timed out", True, "torch"),
    _sig("nccl_timeout", "nccl_error", r"Process group watchdog thread terminated with exception", True, "torch", "watchdog"),
    _sig("nccl_error", "nccl_error", r"(?:c10::|torch\.distributed\.)DistBackendError", True, "torch", "DistBackendError"),
    _sig("nccl_error", "nccl_error", r"NCCL error|NCCL communicator was aborted", True, "torch"),
    _sig("nccl_error", "nccl_error", r"ncclRemoteError", True, "torch"),
    # vLLM v1 (vllm/v1/engine/exceptions.py)
    _sig("vllm_engine_dead", "inference_crashed", r"EngineDeadError|EngineCore encountered an issue", True, "vllm"),
    # vllm/worker/worker_base.py (V0 Ray workers) and vllm/v1/engine/core.py: a method of the engine raised
    _sig(
        "vllm_worker_error",
        "inference_crashed",
        r"Error executing method \w+\. This might cause deadlock in distributed execution",
        True,
        "vllm",
        "Error executing method",
    ),
    _sig("vllm_rpc_failed", "inference_crashed", r"Invocation of collective_rpc method failed", True, "vllm", "collective_rpc"),
    # printed at a clean shutdown too: not a finding alone (frameworks.md 4)
    _sig("vllm_engine_proc_died", None, r"Engine core proc \S+ died unexpectedly", False, "vllm"),
    # TRL vLLM server client (trl/generation/vllm_client.py)
    _sig("vllm_server_unreachable", "inference_unreachable", r"The vLLM server can't be reached at", True, "trl"),
    _sig("vllm_server_not_up", None, r"Server is not up yet\. Retrying in", False, "trl"),
    # OpenRLHF remote reward model client (openrlhf/utils/remote_rm_utils.py) giving up
    _sig(
        "openrlhf_remote_rm",
        "reward_fn_error",
        r"Request error for \d+ times, returning None",
        True,
        "openrlhf",
        "Request error for",
    ),
    # DeepSpeed (deepspeed/launcher/launch.py sigkill_handler; deepspeed/runtime/fp16/loss_scaler.py)
    _sig("deepspeed_exit", "run_crashed", r"exits with return code = (?P<exitcode>-?\d+)", True, "deepspeed"),
    _sig("deepspeed_loss_scale", "run_crashed", r"Current loss scale already at minimum - cannot decrease", True, "deepspeed"),
    _sig("deepspeed_overflow", None, r"Overflow detected\. Skipping step\.", False, "deepspeed"),
    # shell job status of a SIGKILLed process (findings.md host_oom: `Killed`)
    _sig("killed", "host_oom", r"^Killed\b|: line \d+:\s+\d+ Killed\b", True, "shell", "Killed"),
    # prime-rl launcher (src/prime_rl/entrypoints/rl.py; findings.md)
    _sig(
        "prime_rl_failed",
        "run_crashed",
        r"\b(?P<process>[A-Z][\w-]*) failed with exit code (?P<exitcode>-?\d+)",
        True,
        "prime-rl",
        " failed with exit code ",
    ),
    _sig("prime_rl_fatal", "run_crashed", r"Fatal error in (?:train|run_orchestrator|run_server)\b", True, "prime-rl"),
    _sig("prime_rl_nonfinite", "nan_detected", r"Dropping \d+ non-finite value\(s\) from metrics\.jsonl", False, "prime-rl"),
    _sig(
        "run_finished",
        "run_finished",
        r"Training finished!|RL trainer finished!|Orchestrator finished\.",
        False,
        "prime-rl",
        "finished",
    ),
    # verl RayPPOTrainer.fit() pprints this after the last step
    _sig("verl_final_validation", "run_finished", r"Final validation metrics:", False, "verl"),
    # transformers Trainer: end-of-training totals dict
    _sig("trl_train_summary", "run_finished", r"^\{'train_runtime':", False, "trl"),
)

# Traceback frames that put an exception inside reward code:
#   verl verl/utils/reward_score/*, verl/workers/reward_manager/*, verl/experimental/reward_loop/* (compute_score)
#   TRL  trl/trainer/grpo_trainer.py GRPOTrainer._calculate_rewards
#   OpenRLHF openrlhf/utils/agent.py loads a user `reward_func`
_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_REWARD_PATH = re.compile(r"/reward_score/|/reward_manager/|/reward_loop/")
_REWARD_FUNC = re.compile(r"^(?:\w*compute_score\w*|_calculate_rewards\w*|reward_func)$")
_EXCEPTION_LINE = re.compile(r"^\s*(?:\[rank\d+\]:\s*)?(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)\b(?:\(\w+\))?(?::|$)")

_MAX_FRAME_GAP = 100  # lines between a reward frame and its exception line

_ROOT_CAUSE = "Root Cause (first observed failure):"
_FIELD = re.compile(r"^\s*(?P<key>time|host|rank|exitcode|error_file|traceback)\s*:\s*(?P<value>.*)$")


def _as_lines(lines: Iterable[LogLine] | Iterable[str]) -> list[LogLine]:
    out = []
    for index, line in enumerate(lines):
        out.append(line if isinstance(line, LogLine) else LogLine(index + 1, line, None))
    return out


def root_cause(lines: list[LogLine], start: int = 0) -> dict[str, str]:
    """The `Root Cause (first observed failure):` block of a ChildFailedError summary at or after index
    `start`: rank, local_rank, exitcode, pid, host, time, traceback (e.g. `Signal 9 (SIGKILL) ...`)."""
    details: dict[str, str] = {}
    inside = False
    for line in lines[start : start + 200]:
        text = line.text
        if not inside:
            inside = _ROOT_CAUSE in text
            continue
        if text.strip().startswith("====="):
            break
        match = _FIELD.match(text)
        if not match:
            continue
        key, value = match.group("key"), match.group("value").strip()
        if key == "rank":
            rank = re.match(r"(-?\d+)(?: \(local_rank: (-?\d+)\))?", value)
            if rank:
                details["rank"] = rank.group(1)
                if rank.group(2) is not None:
                    details["local_rank"] = rank.group(2)
        elif key == "exitcode":
            code = re.match(r"(-?\d+)(?: \(pid: (\d+)\))?", value)
            if code:
                details["exitcode"] = code.group(1)
                if code.group(2):
                    details["pid"] = code.group(2)
        else:
            details[key] = value
    return details


def _reward_errors(lines: list[LogLine]) -> list[Match]:
    """One reward_fn_error per traceback that passes through reward code, at its exception line."""
    found: list[Match] = []
    frame: dict[str, str] | None = None
    frame_index = 0
    for index, line in enumerate(lines):
        text = line.text
        if "Traceback (most recent call last)" in text or index - frame_index > _MAX_FRAME_GAP:
            frame = None  # a new traceback, or the reward frame's exception line was never recognised
        match = _FRAME.search(text)
        if match:
            if _REWARD_PATH.search(match.group("path")) or _REWARD_FUNC.match(match.group("func")):
                frame, frame_index = match.groupdict(), index
            continue
        if frame is not None and _EXCEPTION_LINE.match(text) and not _FRAME.search(lines[index - 1].text if index else ""):
            details = {**frame, "exception": text.strip()}
            found.append(Match("reward_fn_error", "reward_fn_error", line.lineno, text.strip(), False, details))
            frame = None
    return found


def scan(lines: Iterable[LogLine] | Iterable[str]) -> list[Match]:
    """Every signature match in preprocessed lines (LogLine from lines.iter_lines, or plain strings
    numbered from 1), in line order. ChildFailedError matches carry the root-cause rank and exit code."""
    items = _as_lines(lines)
    matches: list[Match] = []
    for index, line in enumerate(items):
        seen: set[str] = set()
        for signature in SIGNATURES:
            if signature.id in seen or (signature.needle and signature.needle not in line.text):
                continue
            match = signature.pattern.search(line.text)
            if not match:
                continue
            seen.add(signature.id)
            details = {key: value for key, value in match.groupdict().items() if value is not None}
            if signature.id == "child_failed":
                details.update(root_cause(items, index))
            matches.append(Match(signature.id, signature.finding, line.lineno, line.text.strip(), signature.fatal, details))
    matches.extend(_reward_errors(items))
    matches.sort(key=lambda m: m.lineno)
    return matches


def scan_text(text: str) -> list[Match]:
    return scan(iter_lines(text))


def findings(matches: Iterable[Match]) -> dict[str, list[Match]]:
    """finding id -> its matches (signatures without a finding left out)."""
    out: dict[str, list[Match]] = {}
    for match in matches:
        if match.finding:
            out.setdefault(match.finding, []).append(match)
    return out
