"""A small pool of daemon threads: work submitted never blocks the caller, and a job that hangs
holds one thread, never the caller nor the process's exit (a ThreadPoolExecutor joins its
threads at exit, so one hung job would hang the exit too)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


class DaemonPool:
    def __init__(self, workers: int, name: str) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.workers = max(1, workers)
        for i in range(self.workers):
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True).start()

    def submit(self, fn: Callable[[], Any]) -> Future:
        future: Future = Future()
        self._jobs.put((future, fn))
        return future

    def _work(self) -> None:
        while True:
            future, fn = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to whoever collects the future
                future.set_exception(exc)
