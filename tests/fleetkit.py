"""Helpers of the fleet tests: simulated prime-rl runs (the simulator behind `rlagent simulate`),
a loopback webhook receiver, and a watcher built as `rlagent watch` builds it."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from rlagent.config import load_settings
from rlagent.graph.fleet import Watcher
from rlagent.graph.runner import Monitor
from rlagent.tools.notify import NotifySettings, parse_destinations


def simulate(scenario: str, out: Path, *, run_name: str | None = None, resume: bool = False, steps: int | None = None) -> Path:
    """What `rlagent simulate SCENARIO OUT [--run.name N] [--resume] [--steps S]` writes, in-process."""
    from rlagent.commands.simulate import _run
    from rlagent.evals.simulator import SCENARIOS

    overrides = {"layout": None, "seed": None, "onset_step": None, "severity": None, "step_time_s": None, "steps": steps}
    with contextlib.redirect_stdout(io.StringIO()):
        _run(
            SCENARIOS[scenario],
            Path(out),
            overrides,
            resume_flags=(resume, None, None),
            run_name=run_name,
            overwrite=False,
            live=False,
            speed=60.0,
        )
    return Path(out) / run_name if run_name else Path(out)


class Receiver:
    """A webhook on 127.0.0.1: records every POST body; `mode` "ok", "fail" (HTTP 500) or "hang"."""

    def __init__(self, port: int = 0, mode: str = "ok") -> None:
        self.messages: list[dict] = []
        self.paths: list[str] = []
        self.mode = mode
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if receiver.mode == "hang":
                    receiver.release.wait(30)
                    return
                if receiver.mode == "fail":
                    self.send_response(500)
                    self.end_headers()
                    return
                receiver.messages.append(json.loads(body))
                receiver.paths.append(self.path)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/hook/T0KEN-s3cr3t-42") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def texts(self) -> list[str]:
        return [m.get("text") or m.get("content") or "" for m in self.messages]

    def items(self, kind: str) -> list[tuple[str, str]]:
        """(run, finding id) of every item of `kind` in the generic JSON messages received."""
        return [(m["run"], i["finding_id"]) for m in self.messages if "items" in m for i in m["items"] if i["kind"] == kind]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_watcher(roots, home: Path, *, urls=(), cadence_s: float = 0.01, remind: str = "6h", timeout_s: float = 1.0, **watch):
    settings = load_settings(None, home=home, offline=True, watch=watch or None)
    notify = NotifySettings(urls=list(urls), remind_every=remind, timeout_s=timeout_s, attempts=2)

    def make_monitor(run):
        return Monitor(run, home=home, offline=True, write=True, retire_finished=True)

    return Watcher(
        roots,
        home=home,
        cadence_s=cadence_s,
        settings=settings.watch,
        notify=notify,
        destinations=parse_destinations(notify.urls),
        make_monitor=make_monitor,
    )


def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()
