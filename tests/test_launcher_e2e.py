"""The whole gate on a live simulated prime-rl run in a private tmux server: crash -> proposal ->
unanimous review -> a person's No (nothing reaches the pane) -> the next check-in's proposal ->
Yes -> exactly the expected command in the Launcher pane -> the run resumes from its checkpoint
in a new attempt -> verification passes -> the check-in entry and the follow-up entry."""

import shlex
import sys
from pathlib import Path

import pytest

from rlagent.graph.runner import ActionConfig, Monitor
from rlagent.models.actions import ApprovalMode, LaunchSource, LaunchStatus
from rlagent.tools.layout import discover_run
from rlagent.tools.processes import find_run_processes

from launchkit import SimRun, launch, tmux_servers, wait_for  # noqa: F401

pytestmark = pytest.mark.tmux


class SimRunDir:
    """A run the teardown waits on (no process of it may be left)."""

    def __init__(self, run_dir: Path) -> None:
        self.dir, self.name = run_dir, run_dir.name

    def roles(self) -> list[str]:
        return sorted(p.role for p in find_run_processes(self.dir, self.name)[0])


def test_crash_no_then_yes_restarts_from_the_checkpoint_and_verifies(tmp_path, tmux_servers):  # noqa: F811
    tmux = tmux_servers()
    run = SimRun(tmp_path, crash_at=12, ckpt=3)
    launch(tmux, run, tmux_servers)
    actions = ActionConfig(approve=ApprovalMode.ASK, target=tmux.target, verify_timeout_s=30, verify_poll_s=0.2)
    monitor = Monitor(discover_run(run.dir), home=tmp_path / "home", actions=actions)

    healthy = monitor.check_in()  # while it trains: remembers the launch command from WANDB_ARGS
    assert healthy.memory.launch_seen is not None and healthy.memory.launch_seen.source is LaunchSource.WANDB_ARGS
    assert healthy.memory.launch_seen.argv == run.launch_argv and monitor.pending() is None

    wait_for(tmux.idle, 30, "the crash to end the launcher")
    assert "Error: Trainer failed with exit code 1" in tmux.text()
    crashed = monitor.check_in()
    assert {"run_crashed", "process_down"} <= {f.id for f in crashed.out.findings}
    assert crashed.out.proposal.action.value == "restart" and crashed.out.proposal.resume_step == 9
    assert crashed.out.reviews[-1].agreed and len(crashed.out.reviews[-1].verdicts) == 3
    request_id, request = monitor.pending()
    expected = shlex.join(run.resume_argv(9))
    assert request.command == expected
    before = tmux.text()

    declined = monitor.decide(False, by="test person", request_id=request_id)
    assert declined.out.launch.status is LaunchStatus.DECLINED and declined.out.launch.sent is None
    assert tmux.text() == before and "--resume.step" not in tmux.text()
    assert "declined by test person: nothing sent" in run.status()

    again = monitor.check_in()
    request_id, request = monitor.pending()
    assert request.command == expected and again.checkin == crashed.checkin + 1
    entries_before = run.status().count("<!-- rlagent:")

    done = monitor.decide(True, by="test person", request_id=request_id)
    launch_ = done.out.launch
    assert launch_.status is LaunchStatus.SENT and launch_.sent == expected, launch_
    assert launch_.verification.ok, launch_.verification
    assert launch_.verification.attempt == "attempt_2" and launch_.verification.step > 9
    assert tmux.text().count(expected) == 1  # exactly once, word for word
    assert (run.dir / "logs" / "latest").resolve().name == "attempt_2"
    assert "Resuming training from checkpoint step 9" in (run.dir / "logs" / "attempt_2" / "trainer.log").read_text()

    status = run.status()
    assert status.count("<!-- rlagent:") == entries_before + 1  # the follow-up (the check-in entry came before)
    followup = status.rsplit("## ", 1)[1]
    assert "**Health**: Healthy" in followup and f"  ```\n  {expected}\n  ```" in followup
    assert "restart verified" in followup and "new logs/attempt_2" in followup
    assert [d.resume_step for d in done.memory.dispatches] == [9] and done.memory.dispatches[0].verified

    after = monitor.check_in()  # the resumed run is seen as such, and nothing more is proposed
    assert after.out.observation.new_attempt and after.out.proposal is None and monitor.pending() is None
    monitor.close()


def test_the_live_simulator_crash_is_restarted_through_the_gate(tmp_path, tmux_servers):  # noqa: F811
    """`rlagent simulate --live` (the project's prime-rl simulator) typed into the Launcher pane:
    its orchestrator crashes; rlagent's command resumes it into a new attempt past the crash."""
    tmux = tmux_servers()
    name = f"sim-{tmp_path.name[-6:]}"
    launch_argv = [sys.executable, "-m", "rlagent", "simulate", "crash-python-h", str(tmp_path / "out"), "--live"]
    launch_argv += ["--run.name", name, "--step-time", "10", "--speed", "120"]
    run_dir = tmp_path / "out" / name
    tmux.type(shlex.join(launch_argv))
    wait_for(lambda: (run_dir / "logs").is_dir(), 30, "the simulated run to start")
    tmux_servers.runs.append(SimRunDir(run_dir))
    wait_for(tmux.idle, 60, "the simulated crash")
    actions = ActionConfig(
        approve=ApprovalMode.ASK,
        target=tmux.target,
        launch_command=shlex.join(launch_argv),
        verify_timeout_s=60,
        verify_poll_s=0.3,
    )
    monitor = Monitor(discover_run(run_dir), home=tmp_path / "home", actions=actions)
    state = monitor.check_in()
    assert "run_crashed" in {f.id for f in state.out.findings} and state.out.reviews[-1].agreed, state.out.status_entry
    step = state.out.proposal.resume_step
    request_id, request = monitor.pending()
    assert request.command == shlex.join([*launch_argv, "--resume.step", str(step)])
    done = monitor.decide(True, by="test person", request_id=request_id)
    assert done.out.launch.verification.ok, done.out.launch
    assert done.out.launch.verification.attempt == "attempt_2" and done.out.launch.verification.step > step
    assert tmux.text().count(request.command) == 1
    monitor.close()
