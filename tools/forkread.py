"""Big reads on two cores: a forked child does some of the reads while this process does the rest.

A first check-in of a long run reads every log from byte 0: gigabytes of vLLM request lines,
whose byte passes (read, hyperscan, newline count) cost about 0.25 s per GB, beside the
orchestrator's step and warning lines, whose Python parsing costs more per byte than anything.
Threads do not overlap them: measured on the 1 GB bench run, two threads took 0.9-1.1 s against
1.08 s for one, as the byte passes give the GIL back and must win it again after every 8 MB.
A child process does: it inherits everything read so far (fork, no imports), reads its share of
the files and sends the results back pickled.

The child only reads files and computes; it never logs, writes a file, touches the state store
or runs a command, and leaves with os._exit (no buffers flushed twice, no finalizers). Only a
process with one thread forks (`rlagent run`, `check`): a child of a threaded one (`rlagent watch`)
could wait forever for a lock another thread held at the fork, an import's or a log sink's. Whatever
goes wrong in it (killed, a result that cannot be pickled, an exception), this process does the
child's reads itself: slower, nothing lost, and a bug raises here as it would without the child.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

SPLIT_FROM = 64 << 20
"""Reads are split when they hold at least this many new bytes in all: a fork and the pickling
cost a few ms, what a warm check-in's reads take in all."""


@dataclass
class SplitStats:
    """What the child did, for the benchmark and the tests (a child that fails is noticed by
    nobody else: its reads are redone here)."""

    splits: int = 0
    child_tasks: int = 0
    """Tasks whose results came from a child, over every split."""
    peak_child_rss_kb: int = 0
    """The highest VmHWM a child reported: its RSS counts the pages it shares with this process too."""


stats = SplitStats()


def run_split(tasks: Sequence[Callable[[], Any]], weights: Sequence[int], costs: Sequence[float] | None = None) -> list[Any]:
    """Run every task and return their results in order: on two processes when the weights
    (new bytes to read) add up to SPLIT_FROM or more, the platform can fork, this process has one
    thread and may run on two CPUs or more; else here, one after the other.

    The two processes take tasks from one queue, each taking the next as soon as it is free, the
    longest first by `costs` (the caller's estimate of each task's time; by default its weight).
    Longest first matters: a GB of vLLM request lines is read faster than 20 MB of orchestrator
    warnings, and a long task taken last leaves the other process idle."""
    if (
        len(tasks) < 2
        or len(tasks) > _MAX_TASKS
        or sum(weights) < SPLIT_FROM
        or not hasattr(os, "fork")
        or threading.active_count() > 1
        or _cores() < 2
    ):
        return [task() for task in tasks]
    queue_read, queue_write = os.pipe()
    estimate = weights if costs is None else costs
    order = sorted(range(len(tasks)), key=lambda i: -estimate[i])
    os.write(queue_write, b"".join(i.to_bytes(_TOKEN, "little") for i in order))  # fits the pipe
    os.close(queue_write)  # an empty queue reads as EOF
    results_read, results_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(results_read)
        _child(tasks, queue_read, results_write)
    os.close(results_write)
    results: dict[int, Any] = {}
    try:
        _work(tasks, queue_read, results)
        theirs = _collect(results_read)
        stats.splits += 1
        stats.child_tasks += len(theirs)
        results.update(theirs)
    finally:
        while os.read(queue_read, 1 << 16):  # this process raised: the child stops after its task
            pass
        os.close(queue_read)
        os.close(results_read)  # and then gets EPIPE writing its results, and leaves
        _reap(pid)
    for i in range(len(tasks)):  # the child's, if it failed
        if i not in results:
            results[i] = tasks[i]()
    return [results[i] for i in range(len(tasks))]


_TOKEN = 4
_MAX_TASKS = 4096
"""Tokens of 4 bytes: 16 KB of queue, well within a pipe's 64 KB (written before anyone reads)."""


def _cores() -> int:
    """CPUs this process may run on: with one, a child only adds its memory."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _work(tasks: Sequence[Callable[[], Any]], queue_read: int, results: dict[int, Any]) -> None:
    """Take task indexes from the queue until it is empty. Reads of a pipe are whole under its
    lock: with tokens of one size written at once, each read gets one whole token."""
    while token := os.read(queue_read, _TOKEN):
        i = int.from_bytes(token, "little")
        results[i] = tasks[i]()


def _child(tasks: Sequence[Callable[[], Any]], queue_read: int, write_end: int) -> None:
    code = 1
    try:
        results: dict[int, Any] = {}
        _work(tasks, queue_read, results)
        payload = pickle.dumps((_own_peak_kb(), results), protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(payload)
        code = 0
    except BaseException:  # anything at all: the parent reads these files itself
        pass
    finally:
        os._exit(code)


def _collect(read_end: int) -> dict[int, Any]:
    """The child's results, or none if it failed (the caller then runs its tasks)."""
    chunks = []
    while chunk := os.read(read_end, 1 << 20):
        chunks.append(chunk)
    try:
        peak_kb, results = pickle.loads(b"".join(chunks))
    except Exception:  # a child killed midway leaves a truncated pickle
        return {}
    stats.peak_child_rss_kb = max(stats.peak_child_rss_kb, peak_kb)
    return results


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):  # reaped already (a SIGCHLD handler of the embedding program)
        os.waitpid(pid, 0)


def _own_peak_kb() -> int:
    try:
        with open("/proc/self/status", "rb") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(b"VmHWM:"))
    except (OSError, StopIteration, ValueError):
        return 0
