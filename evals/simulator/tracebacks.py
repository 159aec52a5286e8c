"""Real-looking Python tracebacks, rendered by real loguru from a synthetic call stack.

prime-rl's `clean_exit` logs `Fatal error in <fn>` with `logger.opt(exception=True)`, and
loguru (backtrace and diagnose on, colorized, UTF-8 sink) renders the traceback with its own
layout: `>` at the catch point, `│ └` value annotations, SGR colours on "own" frames only.
Hand-writing that is error-prone, so this module builds a throw-away call stack whose frames
carry prime-rl's file names and line numbers (code compiled under those names, source lines
registered in `linecache`), raises the exception at the bottom, catches it where prime-rl
catches it, and asks loguru's own `ExceptionFormatter` to format it. The stack runs in a bare
`_thread` so no simulator frame appears below the fake entry point. Results are cached.
"""

from __future__ import annotations

import _thread
import builtins
import linecache
import sys
import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

from loguru._better_exceptions import ExceptionFormatter

VENV = "/workspace/prime-rl/.venv"
SITE = f"{VENV}/lib/python3.12/site-packages"
SRC = "/workspace/prime-rl/src/prime_rl"
LIB_DIRS = (f"{SITE}/", "/usr/lib/python3.12/")
"""What loguru treats as library code on the simulated machine (no colours there)."""


@dataclass(frozen=True)
class Frame:
    """One frame as it should appear: where, which function, the source line, the values."""

    path: str
    line: int
    function: str
    source: str
    values: tuple[tuple[str, str], ...] = field(default=())
    """(dotted name, repr) pairs that loguru's diagnose shows under the source line."""
    catches: bool = False
    """The frame whose `except` logs the error (loguru marks it with `>`)."""


class _Repr:
    """An object whose repr is fixed text; attributes carry the dotted sub-values."""

    def __init__(self, text: str) -> None:
        self._text = text

    def __repr__(self) -> str:
        return self._text


def _namespace(frame: Frame) -> dict[str, object]:
    ns: dict[str, object] = {"__builtins__": builtins}
    objects: dict[str, _Repr] = {}
    for dotted, text in sorted(frame.values, key=lambda kv: kv[0].count(".")):
        obj = _Repr(text)
        objects[dotted] = obj
        head, _, attr = dotted.rpartition(".")
        if head:
            setattr(objects[head], attr, obj)
        else:
            ns[dotted] = obj
    return ns


def _compile(frame: Frame, is_last: bool) -> types.FunctionType:
    """A function named like the frame whose call/raise sits at exactly `frame.line`."""
    body = "raise __sim_exc__" if is_last else "__sim_next__()"
    if frame.function == "<module>":
        src = "\n" * (frame.line - 1) + body + "\n"
        code = compile(src, frame.path, "exec")
        return types.FunctionType(code, _namespace(frame))
    if frame.catches:
        src = "\n" * (frame.line - 3) + f"def {frame.function}():\n try:\n  {body}\n except BaseException:\n  __sim_catch__()\n"
    else:
        src = "\n" * (frame.line - 2) + f"def {frame.function}():\n {body}\n"
    ns = _namespace(frame)
    exec(compile(src, frame.path, "exec"), ns)
    return ns[frame.function]  # type: ignore[return-value]


def _register_sources(frames: Sequence[Frame]) -> None:
    by_path: dict[str, dict[int, str]] = {}
    for f in frames:
        by_path.setdefault(f.path, {})[f.line] = f.source
    for path, lines in by_path.items():
        text = [""] * max(lines)
        for no, src in lines.items():
            text[no - 1] = src
        content = [line + "\n" for line in text]
        linecache.cache[path] = (sum(map(len, content)), None, content, path)


@lru_cache(maxsize=64)
def render(frames: tuple[Frame, ...], exc_type: str, message: str) -> str:
    """The text loguru appends after the `Fatal error ...` line (ends with a newline)."""
    if sum(f.catches for f in frames) != 1:
        raise ValueError("exactly one frame must catch")
    module, _, name = exc_type.rpartition(".")
    exc_cls = type(name, (RuntimeError,), {"__module__": module or "builtins"})
    formatter = ExceptionFormatter(colorize=True, encoding="utf-8", diagnose=True, backtrace=True)
    formatter._lib_dirs = list(LIB_DIRS)
    out: list[str] = []
    _register_sources(frames)
    funcs: list[types.FunctionType] = [_compile(f, i == len(frames) - 1) for i, f in enumerate(frames)]
    done = _thread.allocate_lock()
    done.acquire()

    def catch() -> None:
        out.append("".join(formatter.format_exception(*sys.exc_info())))
        done.release()

    for i, fn in enumerate(funcs):
        fn.__globals__["__sim_next__"] = funcs[i + 1] if i + 1 < len(funcs) else None
        fn.__globals__["__sim_exc__"] = exc_cls(message)
        fn.__globals__["__sim_catch__"] = catch
    # The fake entry point is the thread's target itself: nothing of ours sits below it.
    _thread.start_new_thread(funcs[0], ())
    finished = done.acquire(timeout=10)
    for path in {f.path for f in frames}:
        linecache.cache.pop(path, None)
    if not finished or not out:
        raise RuntimeError("synthetic stack did not reach its catch frame")
    return out[0]


# ---- the tracebacks prime-rl runs produce ---------------------------------------------------


def _addr(seed: int, k: int) -> str:
    """A plausible, deterministic CPython heap address (`0x7f` + 10 hex digits)."""
    return f"0x7f{(seed * 2654435761 + k * 40503 * 4099) % 0xFFFFFFFFFF:010x}"


def trainer_oom_frames(seed: int, model: str) -> tuple[Frame, ...]:
    """`train()` dies in `loss.backward()`; `clean_exit`'s `sync_wrapper` catches it."""
    train_py = f"{SRC}/trainer/rl/train.py"
    a = lambda k: _addr(seed, k)  # noqa: E731
    cfg = f"RLTrainerConfig(model=ModelConfig(name='{model}', seq_len=2048, ...), ...)"
    return (
        Frame(train_py, 641, "<module>", "main()", (("main", f"<function main at {a(1)}>"),)),
        Frame(
            train_py,
            637,
            "main",
            "train(cli(RLTrainerConfig))",
            (
                ("train", f"<function train at {a(2)}>"),
                ("cli", f"<function cli at {a(3)}>"),
                ("RLTrainerConfig", "<class 'prime_rl.configs.trainer.RLTrainerConfig'>"),
            ),
        ),
        Frame(
            f"{SRC}/utils/utils.py",
            78,
            "sync_wrapper",
            "ret = func(*args, **kwargs)",
            (("func", f"<function train at {a(4)}>"), ("args", f"({cfg},)"), ("kwargs", "{}")),
            catches=True,
        ),
        Frame(
            train_py,
            412,
            "train",
            "loss.backward()",
            (
                ("loss", "tensor(0.0013, device='cuda:0', grad_fn=<AddBackward0>)"),
                ("loss.backward", f"<function Tensor.backward at {a(5)}>"),
            ),
        ),
        Frame(
            f"{SITE}/torch/_tensor.py",
            648,
            "backward",
            "torch.autograd.backward(",
            (
                ("torch", f"<module 'torch' from '{SITE}/torch/__init__.py'>"),
                ("torch.autograd", f"<module 'torch.autograd' from '{SITE}/torch/autograd/__init__.py'>"),
                ("torch.autograd.backward", f"<function backward at {a(6)}>"),
            ),
        ),
        Frame(
            f"{SITE}/torch/autograd/__init__.py",
            353,
            "backward",
            "_engine_run_backward(",
            (("_engine_run_backward", f"<function _engine_run_backward at {a(7)}>"),),
        ),
        Frame(
            f"{SITE}/torch/autograd/graph.py",
            824,
            "_engine_run_backward",
            "return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
            (
                ("Variable", "<class 'torch.autograd.variable.Variable'>"),
                ("Variable._execution_engine", f"<torch._C._EngineBase object at {a(8)}>"),
                (
                    "Variable._execution_engine.run_backward",
                    f"<built-in method run_backward of torch._C._EngineBase object at {a(8)}>",
                ),
            ),
        ),
    )


def cuda_oom_message(alloc_gib: float, total_gib: float, free_mib: float, in_use_gib: float) -> str:
    allocated = in_use_gib - 5.9
    return (
        f"CUDA out of memory. Tried to allocate {alloc_gib:.2f} GiB. GPU 0 has a total capacity of "
        f"{total_gib:.2f} GiB of which {free_mib:.2f} MiB is free. Including non-PyTorch memory, this process "
        f"has {in_use_gib:.2f} GiB memory in use. Of the allocated memory {allocated:.2f} GiB is allocated by "
        f"PyTorch, and {in_use_gib - allocated - 0.4:.2f} GiB is reserved by PyTorch but unallocated. If reserved "
        "but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
        "fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def _env_server_handle(vf: str, address: str) -> Frame:
    """The env server's request handler, where every env-side traceback is caught and logged."""
    return Frame(
        f"{vf}/serve/server.py",
        214,
        "handle",
        "result = await self.run_episode(request)",
        (("self", f"<verifiers.v1.serve.server.EnvServer object at {address}>"),),
        catches=True,
    )


def child_failed_block(
    glog_prefix: str,
    stamp: str,
    host: str,
    child_pid: int,
    script: str = "src/prime_rl/trainer/rl/train.py",
    *,
    exitcode: int = 1,
    traceback: str = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
) -> str:
    """torchrun's agent output when rank 0 fails (its own stderr: no `[trainer0]:` prefix).
    A signal shows as a negative exit code and names the signal in `traceback`."""
    return (
        f"{glog_prefix}failed (exitcode: {exitcode}) local_rank: 0 (pid: {child_pid}) of binary: {VENV}/bin/python3\n"
        "Traceback (most recent call last):\n"
        f'  File "{VENV}/bin/torchrun", line 10, in <module>\n'
        "    sys.exit(main())\n"
        "             ^^^^^^\n"
        f'  File "{SITE}/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 357, in wrapper\n'
        "    return f(*args, **kwargs)\n"
        "           ^^^^^^^^^^^^^^^^^^\n"
        f'  File "{SITE}/torch/distributed/run.py", line 901, in main\n'
        "    run(args)\n"
        f'  File "{SITE}/torch/distributed/run.py", line 892, in run\n'
        "    elastic_launch(\n"
        f'  File "{SITE}/torch/distributed/launcher/api.py", line 143, in __call__\n'
        "    return launch_agent(self._config, self._entrypoint, list(args))\n"
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        f'  File "{SITE}/torch/distributed/launcher/api.py", line 277, in launch_agent\n'
        "    raise ChildFailedError(\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "============================================================\n"
        f"{script} FAILED\n"
        "------------------------------------------------------------\n"
        "Failures:\n"
        "  <NO_OTHER_FAILURES>\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n"
        f"  time      : {stamp}\n"
        f"  host      : {host}\n"
        "  rank      : 0 (local_rank: 0)\n"
        f"  exitcode  : {exitcode} (pid: {child_pid})\n"
        "  error_file: <N/A>\n"
        f"  traceback : {traceback}\n"
        "============================================================\n"
    )


def nccl_watchdog_lines(when: datetime, seq: int, seed: int) -> str:
    """What c10d prints on rank 0 when a collective times out: `[rank0]:`-prefixed glog lines,
    the C++ stack of the watchdog thread, then std::terminate's `what()` (no loguru head)."""
    base = when.strftime("%m%d %H:%M:%S")
    nanos = (when.microsecond * 1000 + seed * 7919) % 1_000_000_000
    lib = f"{SITE}/torch/lib"
    work = (
        f"WorkNCCL(SeqNum={seq}, OpType=_ALLGATHER_BASE, NumelIn=77594624, NumelOut=155189248, "
        f"Timeout(ms)=600000) ran for 600012 milliseconds before timing out."
    )
    head = f"[rank0]:[E{base}.{nanos:09d} ProcessGroupNCCL.cpp"
    pg = "[PG ID 0 PG GUID 0(default_pg) Rank 0]"
    addr = lambda k: f"0x7f{(seed * 2654435761 + k * 7340033) % 0xFFFFFFFFFF:010x}"  # noqa: E731
    return (
        f"{head}:632] [Rank 0] Watchdog caught collective operation timeout: {work}\n"
        f"{head}:2271] {pg}  failure detected by watchdog at work sequence id: {seq} PG status: "
        f"last enqueued work: {seq + 1}, last completed work: {seq - 1}\n"
        f"{head}:670] Stack trace of the failed collective not found, potentially because FlightRecorder is disabled. "
        "You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.\n"
        f"{head}:684] [Rank 0] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA "
        "kernels, subsequent GPU operations might run on corrupted/incomplete data.\n"
        f"{head}:698] [Rank 0] To avoid data inconsistency, we are taking the entire process down.\n"
        f"{head}:1904] {pg} Process group watchdog thread terminated with exception: [Rank 0] Watchdog caught "
        f"collective operation timeout: {work}\n"
        "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:635 "
        "(most recent call first):\n"
        f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 ({addr(1)} in {lib}/libc10.so)\n"
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
        f"std::ratio<1l, 1000l> > >) + 0x282 ({addr(2)} in {lib}/libtorch_cuda.so)\n"
        f"frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 ({addr(3)} in {lib}/libtorch_cuda.so)\n"
        f"frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x14d ({addr(4)} in {lib}/libtorch_cuda.so)\n"
        f"frame #4: <unknown function> + 0xdc253 ({addr(5)} in /lib/x86_64-linux-gnu/libstdc++.so.6)\n"
        f"frame #5: <unknown function> + 0x94ac3 ({addr(6)} in /lib/x86_64-linux-gnu/libc.so.6)\n"
        f"frame #6: <unknown function> + 0x126850 ({addr(7)} in /lib/x86_64-linux-gnu/libc.so.6)\n"
        "\n"
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        f"  what():  {pg} Process group watchdog thread terminated with exception: [Rank 0] Watchdog caught "
        f"collective operation timeout: {work}\n"
    )


def orchestrator_frames(seed: int, leaf: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """`run_orchestrator` (caught by `clean_exit`'s async wrapper) down to `leaf`."""
    orch = f"{SRC}/orchestrator/orchestrator.py"
    a = lambda k: _addr(seed, 40 + k)  # noqa: E731
    return (
        Frame(orch, 1012, "<module>", "main()", (("main", f"<function main at {a(1)}>"),)),
        Frame(
            orch,
            1008,
            "main",
            "asyncio.run(run_orchestrator(cli(OrchestratorConfig)))",
            (
                ("asyncio", "<module 'asyncio' from '/usr/lib/python3.12/asyncio/__init__.py'>"),
                ("asyncio.run", f"<function run at {a(2)}>"),
                ("run_orchestrator", f"<function run_orchestrator at {a(3)}>"),
            ),
        ),
        Frame("/usr/lib/python3.12/asyncio/runners.py", 195, "run", "return runner.run(main)"),
        Frame("/usr/lib/python3.12/asyncio/base_events.py", 691, "run_until_complete", "return future.result()"),
        Frame(
            f"{SRC}/utils/utils.py",
            64,
            "async_wrapper",
            "ret = await func(*args, **kwargs)",
            (("func", f"<function run_orchestrator at {a(4)}>"),),
            catches=True,
        ),
        *leaf,
    )


def scoring_keyerror_frames(seed: int) -> tuple[Frame, ...]:
    """A rubric reading a dataset column that the env's new version renamed."""
    vf = f"{SITE}/verifiers/v1"
    a = lambda k: _addr(seed, 60 + k)  # noqa: E731
    return orchestrator_frames(
        seed,
        (
            Frame(
                f"{SRC}/orchestrator/orchestrator.py",
                655,
                "run_orchestrator",
                "await shipper.on_batch(await train_sink.next_batch())",
                (("shipper", f"<prime_rl.orchestrator.shipper.Shipper object at {a(1)}>"),),
            ),
            Frame(
                f"{SRC}/orchestrator/train_sink.py",
                212,
                "next_batch",
                "scored = await self.score_group(group)",
                (("group", "<EpisodeGroup 16 episodes>"),),
            ),
            Frame(
                f"{vf}/rubric.py",
                143,
                "score_group",
                "return [await self.score(episode, task.data['answer']) for episode in group]",
                (
                    ("task", f"<verifiers.v1.task.Task object at {a(2)}>"),
                    ("task.data", "{'prompt': 'the quiet harbour lanterns glow softly', 'target': 'yltfos wolg snretnal'}"),
                ),
            ),
        ),
    )


def inference_abort_frames(seed: int) -> tuple[Frame, ...]:
    """The orchestrator's wait for the inference server giving up."""
    a = lambda k: _addr(seed, 80 + k)  # noqa: E731
    return orchestrator_frames(
        seed,
        (
            Frame(
                f"{SRC}/orchestrator/orchestrator.py",
                702,
                "run_orchestrator",
                "await check_health(clients, timeout=config.client.health_timeout)",
                (("clients", f"[<prime_rl.utils.client.InferenceClient object at {a(1)}>]"),),
            ),
            Frame(
                f"{SRC}/utils/client.py",
                118,
                "check_health",
                "raise TimeoutError(f'Inference server is not ready after {waited} seconds')",
                (("waited", "1800"),),
            ),
        ),
    )


def env_sandbox_frames(seed: int) -> tuple[Frame, ...]:
    """An env-server request whose sandbox died (env-errors)."""
    vf = f"{SITE}/verifiers/v1"
    a = lambda k: _addr(seed, 100 + k)  # noqa: E731
    return (
        _env_server_handle(vf, a(1)),
        Frame(f"{vf}/serve/server.py", 249, "run_episode", "return await episode.run()"),
        Frame(
            f"{vf}/sandbox/process.py",
            188,
            "exec",
            "raise RuntimeError(f'sandbox exited unexpectedly (exit code {proc.returncode})')",
            (("proc.returncode", "137"), ("proc", f"<Process pid=51234 returncode=137 at {a(2)}>")),
        ),
    )
