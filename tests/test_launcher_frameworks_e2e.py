"""The whole gate on live SIMULATED verl, TRL and OpenRLHF runs in a private tmux server: the run is typed
into the Launcher pane, crashes, the check-in sees it, the review agrees on the framework's own
resume command, a person says Yes, exactly that command reaches the pane, the run comes back from its
newest checkpoint (the framework's processes are found again and its console log grows past the
checkpoint) and the next check-in proposes nothing. The crashes are ones a plain restart fixes (a killed
Ray actor, an NCCL watchdog abort): after a CUDA OOM rlagent proposes no restart of these frameworks, as
it has no smaller-memory override for them, and that is tested in the rules."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rlagent.graph.runner import ActionConfig, Monitor
from rlagent.models.actions import ApprovalMode, LaunchStatus
from rlagent.tools.adapters import adapter_for, discover
from rlagent.tools.framework_processes import find_framework_processes

from launchkit import tmux_servers, wait_for  # noqa: F401

pytestmark = pytest.mark.tmux


class FrameworkRun:
    """A live simulated run the teardown waits on (no process of it may be left)."""

    def __init__(self, run_dir: Path, framework: str) -> None:
        self.dir, self.framework = run_dir, framework

    def roles(self) -> list[str]:
        if not self.dir.is_dir():
            return []
        run = discover(self.dir)
        markers = adapter_for(run.framework).process_markers(run)
        return sorted(p.role for p in find_framework_processes(str(self.dir), markers, self.framework)[0])


CASES = [
    # (scenario, the resume words the framework's adapter adds, the checkpoint it resumes from, console log)
    pytest.param("verl-actor-died", "trainer.resume_mode=auto", 10, "verl_demo.log", id="verl"),
    pytest.param("trl-nccl-timeout", "--resume_from_checkpoint", 10, "train.log", id="trl"),
    pytest.param("openrlhf-actor-died", "--load_checkpoint", 10, "train.log", id="openrlhf"),
]


@pytest.mark.parametrize(("scenario", "resume_words", "ckpt", "log_name"), CASES)
def test_a_crashed_framework_run_is_resumed_through_the_gate(tmp_path, tmux_servers, scenario, resume_words, ckpt, log_name):  # noqa: F811
    framework = scenario.split("-", 1)[0]
    tmux = tmux_servers(session=framework, window="Launcher")
    run_dir = tmp_path / "run"
    launch_argv = [sys.executable, "-m", "rlagent", "simulate", scenario, str(run_dir), "--live"]
    launch_argv += ["--speed", "90", "--steps", "16", "--onset", "13"]  # ~0.7 s a step: the resumed run is seen alive
    tmux.type(shlex.join(launch_argv))
    wait_for(lambda: (run_dir / log_name).is_file(), 30, "the simulated run to start")
    tmux_servers.runs.append(FrameworkRun(run_dir, framework))
    wait_for(tmux.idle, 90, "the simulated crash")

    actions = ActionConfig(
        approve=ApprovalMode.ASK,
        target=tmux.target,
        launch_command=shlex.join(launch_argv),
        verify_timeout_s=90,
        verify_poll_s=0.3,
    )
    run = discover(run_dir)
    assert run.framework.value == framework
    monitor = Monitor(run, home=tmp_path / "home", actions=actions)
    crashed = monitor.check_in()
    ids = {f.id for f in crashed.out.findings}
    assert "run_crashed" in ids, crashed.out.status_entry
    proposal = crashed.out.proposal
    assert proposal is not None and proposal.action.value == "restart" and proposal.resume_step == ckpt
    assert crashed.out.reviews[-1].agreed, crashed.out.reviews[-1]
    request_id, request = monitor.pending()
    words = shlex.split(request.command)
    assert words[: len(launch_argv)] == launch_argv  # the run's own command, then the resume flags
    assert " ".join(words[len(launch_argv) :]).startswith(resume_words)

    log = run_dir / log_name
    size_before = log.stat().st_size
    done = monitor.decide(True, by="test person", request_id=request_id)
    launch = done.out.launch
    assert launch.status is LaunchStatus.SENT and launch.sent == request.command, launch
    assert launch.verification.ok, [c.detail for c in launch.verification.checks]
    assert launch.verification.step is not None and launch.verification.step > ckpt
    assert tmux.text().count(request.command) == 1  # exactly once, word for word
    assert log.stat().st_size > size_before

    wait_for(tmux.idle, 90, "the resumed run to finish")
    after = monitor.check_in()
    assert after.out.proposal is None and monitor.pending() is None, after.out.status_entry
    monitor.close()


@pytest.mark.parametrize("scenario", ["verl-crash-oom", "trl-crash-oom", "openrlhf-crash-oom"])
def test_after_a_cuda_oom_no_framework_restart_is_proposed(tmp_path, scenario):
    """The same command would run out of memory again, and rlagent has no memory override for these
    frameworks: the check-in says so and proposes nothing."""
    run_dir = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "rlagent", "simulate", scenario, str(run_dir)], check=True, capture_output=True)
    done = subprocess.run(
        [sys.executable, "-m", "rlagent", "check", str(run_dir), "--offline", "--json"], capture_output=True, text=True
    )
    report = json.loads(done.stdout)
    assert {"run_crashed", "cuda_oom"} <= {f["id"] for f in report["findings"]} and report["health"] == "Down"
    assert report["proposal"] is None
    framework = scenario.split("-", 1)[0]
    assert report["proposal_notes"] == [
        f"CUDA out of memory: a {framework} restart with the same settings would run out again, and rlagent changes no "
        f"{framework} memory setting; no restart proposed (smaller micro-batches, offloading or a lower vLLM "
        "gpu_memory_utilization are the researcher's call)"
    ]
