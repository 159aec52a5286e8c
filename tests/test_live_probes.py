"""Live probes against real things: titled processes, a local vLLM-like /metrics server."""

import http.server
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from rlagent.agents.rules.thresholds import Thresholds
from rlagent.graph.runner import Effects, Monitor
from rlagent.models.run import Health
from rlagent.tools.clock import SystemClock
from rlagent.tools.hostprobes import parse_vllm_metrics, probe_vllm
from rlagent.tools.layout import discover_run
from rlagent.tools.processes import find_run_processes

from runbuilder import HRun

# A prime-rl process: titled with setproctitle (which zeroes its /proc environ), holding its
# log open. With --via-parent it runs under an untitled parent, as the Trainer runs under torchrun.
CHILD = textwrap.dedent("""
    import subprocess, sys, time
    if sys.argv[1] == "--via-parent":
        child = subprocess.Popen([sys.executable, "-c", sys.argv[2], *sys.argv[3:]], stdout=sys.stdout)
        child.wait()
        sys.exit(0)
    import setproctitle
    setproctitle.setproctitle(sys.argv[1])
    handle = open(sys.argv[2], "a") if len(sys.argv) > 2 else None
    print("ready", flush=True)
    time.sleep(120)
""")


def spawn(title, env_name=None, open_file=None, via_parent=False):
    env = {"PATH": "/usr/bin:/bin"}
    if env_name:
        env["PRL_RUN_NAME"] = env_name
    args = [title] + ([str(open_file)] if open_file else [])
    if via_parent:
        args = ["--via-parent", CHILD, *args]
    proc = subprocess.Popen([sys.executable, "-c", CHILD, *args], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def titled_pid(proc):
    """The titled process: the child itself, or its child when spawned via a parent."""
    import psutil

    kids = psutil.Process(proc.pid).children()
    return kids[0].pid if kids else proc.pid


@pytest.fixture
def children():
    procs = []
    yield procs
    import psutil

    for proc in procs:
        for kid in psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []:
            kid.kill()
        proc.kill()
        proc.wait()


def test_processes_are_tied_to_their_own_run(tmp_path, children):
    run = HRun(tmp_path, "run-a")
    other = HRun(tmp_path, "run-b")
    children.append(spawn("PRIME-RL::Trainer", env_name="run-a", via_parent=True))
    children.append(spawn("PRIME-RL::Orchestrator", open_file=run.logs / "orchestrator.log"))
    children.append(spawn("PRIME-RL::Trainer", env_name="run-b", via_parent=True))
    found, how = find_run_processes(run.dir.resolve(), "run-a")
    assert sorted((p.role, p.pid) for p in found) == sorted(
        [("Trainer", titled_pid(children[0])), ("Orchestrator", children[1].pid)]
    )
    assert "environment (1)" in how and "open files (1)" in how
    found_b, _ = find_run_processes(other.dir.resolve(), "run-b")
    assert [p.pid for p in found_b] == [titled_pid(children[2])]


def test_two_runs_with_the_same_name_in_different_output_dirs_are_told_apart(tmp_path, children):
    mine = HRun(tmp_path / "out-a", "run-a")
    theirs = HRun(tmp_path / "out-b", "run-a")
    theirs_log = theirs.logs / "orchestrator.log"
    children.append(spawn("PRIME-RL::Orchestrator", env_name="run-a", open_file=theirs_log, via_parent=True))
    children.append(spawn("PRIME-RL::Trainer", env_name="run-a", via_parent=True))
    found, _ = find_run_processes(mine.dir.resolve(), "run-a")
    assert [p.role for p in found] == ["Trainer"]  # the Orchestrator writes into the other run-a


def test_a_process_that_dies_is_reported_down(tmp_path, children):
    run = HRun(tmp_path, "run-a")
    run.steps(6)
    for role in ("Trainer", "Orchestrator", "Inference"):
        children.append(spawn(f"PRIME-RL::{role}", open_file=run.logs / f"{role.lower()}.log"))
    # The host is probed for real; its free disk is this machine's, not the test's: never low here.
    roomy = Thresholds(disk_free_low=0.0)
    clock = SystemClock(lambda: run.clock)
    mon = Monitor(discover_run(run.dir), home=tmp_path / "home", effects=Effects(clock=clock), thresholds=roomy)
    first = mon.check_in()
    assert first.out.health is Health.HEALTHY, first.out.findings
    assert sorted(p.role for p in first.out.observation.live.processes) == ["Inference", "Orchestrator", "Trainer"]
    assert "Processes**: " in run.status() and "Trainer (pid" in run.status()
    children[1].kill()
    children[1].wait()
    second = mon.check_in()
    assert second.out.health is Health.DOWN
    assert any(f.id == "process_down" and "Orchestrator" in f.summary for f in second.out.findings)


PROMETHEUS = """# HELP vllm:kv_cache_usage_perc KV-cache usage.
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-0.6B"} 0.97
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-0.6B"} 60.0
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-0.6B"} 12.0
vllm:num_requests_waiting_by_reason{reason="capacity"} 12.0
"""


class _Metrics(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = PROMETHEUS.encode() if self.path == "/metrics" else b""
        self.send_response(200 if body else 404)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_vllm_metrics_probe_against_a_local_server():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        metrics = probe_vllm(f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
    assert metrics == {"kv_cache_usage_perc": 0.97, "num_requests_running": 60.0, "num_requests_waiting": 12.0}
    assert parse_vllm_metrics("vllm:gpu_cache_usage_perc 0.5\n") == {"gpu_cache_usage_perc": 0.5}


def test_unreachable_vllm_is_a_clear_error_within_the_timeout():
    started = time.monotonic()
    with pytest.raises(OSError, match="not reachable"):
        probe_vllm("http://127.0.0.1:9", timeout=1.0)
    assert time.monotonic() - started < 5
