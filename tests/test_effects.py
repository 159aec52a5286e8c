"""The side effects behind their interfaces, driven by fakes (tests/fakes.py): a restart approved,
sent, verified and followed up with no tmux, no process and no real waiting; the ways a send
fails; the cadence schedule; vLLM's /metrics over a fake HTTP; a full disk under STATUS.md; the
launch command read from processes and from the pane's history."""

import errno
import json
import os
from pathlib import Path

import pytest

from rlagent.agents.command_plan import PlanDeps, find_launch_command
from rlagent.graph.cadence import at_cadence
from rlagent.graph.runner import ActionConfig, CannotSend, Effects, Monitor
from rlagent.models.actions import ApprovalMode, LaunchCommand, LaunchSource, LaunchStatus, TmuxTarget
from rlagent.models.observation import LiveProbes, Observation
from rlagent.models.run import RunInfo
from rlagent.models.state import CheckinOutput, CheckinState
from rlagent.tools.hostprobes import probe_vllm
from rlagent.tools.launch_command import build_argv, command_line
from rlagent.tools.layout import discover_run

from fakes import FakeClock, FakeHost, FakeHttp, FakePane, FakeProcesses, FakeTmux, MemoryStatus, processes
from launchkit import crashed_h_run
from runbuilder import START, HRun

LAUNCH = "uv run rl @ examples/reverse_text/rl.toml --max-steps 100"
TARGET = TmuxTarget(socket="rlagent-test-fake")


def live_monitor(run: HRun, tmp_path: Path, effects: Effects, **actions) -> Monitor:
    config = ActionConfig(approve=ApprovalMode.ASK, target=TARGET, launch_command=LAUNCH, **actions)
    return Monitor(discover_run(run.dir), home=tmp_path / "home", effects=effects, actions=config)


def crashed(tmp_path: Path):
    """A crashed run and fakes of everything a live check-in and a send touch."""
    run = crashed_h_run(tmp_path)
    clock = FakeClock(run.clock)
    fakes = {
        "clock": clock,
        "status": MemoryStatus(),
        "processes": FakeProcesses(),  # crashed: nothing alive
        "host": FakeHost(),
        "http_get": FakeHttp(),
        "open_pane": FakeTmux(FakePane(busy=None)),
    }
    return run, fakes


def expected_command(run: HRun) -> str:
    argv = build_argv(
        LAUNCH.split(), layout="H", run_dir=str(run.dir), run_name=run.dir.name, resume_step=10, overrides=[], max_steps=100
    )
    return command_line(argv)


def test_an_approved_restart_is_sent_verified_and_followed_up_through_the_fakes(tmp_path):
    run, fakes = crashed(tmp_path)
    clock, status, procs, pane = fakes["clock"], fakes["status"], fakes["processes"], fakes["open_pane"].pane

    def the_run_comes_back(clock: FakeClock) -> None:
        if len(clock.slept) == 3:  # six seconds after the send: processes, a new attempt, steps past 10
            procs.roles = ["Trainer", "Orchestrator"]
            run.new_attempt()
            run.step = 10
            run.steps(3)

    clock.on_sleep = the_run_comes_back
    monitor = live_monitor(run, tmp_path, Effects(**fakes), verify_timeout_s=600, verify_poll_s=2)
    try:
        state = monitor.check_in()
        request_id, request = monitor.pending()
        assert request.command == expected_command(run) and pane.sent == []  # nothing before a person says yes
        done = monitor.decide(True, by="tester", request_id=request_id)
    finally:
        monitor.close()

    assert pane.sent == [("line", expected_command(run))]
    launch = done.out.launch
    assert launch.status is LaunchStatus.SENT and launch.note == "restart verified"
    assert launch.verification.ok and launch.verification.step == 13 and launch.verification.attempt == "attempt_2"
    assert clock.slept == [2, 2, 2] and launch.verification.waited_s == 6.0  # polled, not waited for real
    assert [d.verified for d in done.memory.dispatches] == [True]
    # STATUS.md: the summary and entry of the check-in, then the follow-up, all through the one sink.
    entries = status.entries[run.dir]
    assert len(entries) == 2 and entries[0].startswith("# Run status:") and state.out.status_entry in entries[0]
    assert "follow-up to check-in #1" in entries[1] and expected_command(run) in entries[1]
    assert "**Health**: Healthy" in entries[1] and "restart verified" in entries[1]
    assert not (run.dir / "STATUS.md").exists()


def test_a_restart_that_exits_at_once_fails_without_waiting_out_the_timeout(tmp_path):
    run, fakes = crashed(tmp_path)
    # idle when the send is checked, then the command runs, then the shell prompt is back
    pane = FakePane(busy=[None, "rl", None], lines=["$ uv run rl @ ...", "Error: examples/reverse_text/rl.toml not found"])
    fakes["open_pane"] = FakeTmux(pane)
    monitor = live_monitor(run, tmp_path, Effects(**fakes), verify_timeout_s=600, verify_poll_s=2)
    try:
        monitor.check_in()
        done = monitor.decide(True, by="tester", request_id=monitor.pending()[0])
    finally:
        monitor.close()
    launch = done.out.launch
    assert launch.status is LaunchStatus.SENT and not launch.verification.ok
    exited = launch.verification.checks[-1]
    assert exited.name == "command_running" and "Error: examples/reverse_text/rl.toml not found" in exited.detail
    assert fakes["clock"].slept == [2]  # one poll saw it running, the next saw it gone
    assert [d.verified for d in done.memory.dispatches] == [False]
    assert "**Health**: Down" in fakes["status"].entries[run.dir][-1]


def test_a_restart_not_back_in_time_fails_when_the_bounded_wait_is_up(tmp_path):
    run, fakes = crashed(tmp_path)
    fakes["open_pane"] = FakeTmux(FakePane(busy=[None, "rl"]))  # it keeps running, the run never shows up
    monitor = live_monitor(run, tmp_path, Effects(**fakes), verify_timeout_s=10, verify_poll_s=3)
    try:
        monitor.check_in()
        done = monitor.decide(True, by="tester", request_id=monitor.pending()[0])
    finally:
        monitor.close()
    verification = done.out.launch.verification
    assert not verification.ok and verification.checks[-1].name == "in_time"
    assert verification.checks[-1].detail == "not back within 10 s" and verification.waited_s == 12.0
    assert fakes["clock"].slept == [3, 3, 3, 3]
    assert done.out.launch.note.startswith("restart failed: no Trainer, Orchestrator process yet")


def test_an_unreachable_tmux_server_sends_nothing_and_says_why(tmp_path):
    run, fakes = crashed(tmp_path)
    fakes["open_pane"] = FakeTmux(missing="no tmux server on tmux socket 'rlagent-test-fake'")
    monitor = live_monitor(run, tmp_path, Effects(**fakes))
    try:
        monitor.check_in()
        request_id = monitor.pending()[0]
        with pytest.raises(CannotSend) as why:
            monitor.decide(True, by="tester", request_id=request_id)
        assert monitor.pending()[0] == request_id  # still pending: start tmux, then answer again
        state = monitor.state()
    finally:
        monitor.close()
    assert str(why.value) == "no tmux server on tmux socket 'rlagent-test-fake'; nothing sent, the decision is still pending"
    assert state.out.launch is None and state.memory.dispatches == [] and fakes["clock"].slept == []
    assert "nothing sent" not in fakes["status"].entries[run.dir][-1]  # no follow-up: nothing was decided yet


def test_a_full_disk_under_status_md_is_a_note_not_a_crash(tmp_path):
    run = HRun(tmp_path)
    run.steps(12)
    full = MemoryStatus(fail=OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    monitor = Monitor(discover_run(run.dir), home=tmp_path / "home", offline=True, effects=Effects(status=full))
    try:
        state = monitor.check_in()
    finally:
        monitor.close()
    assert state.out.written is False
    assert (
        "- STATUS.md could not be written: No space left on device; nothing half-written was left, "
        "and 1 entry will be appended next time\n<!-- rlagent:checkin " in state.out.status_entry
    )
    assert state.out.write_error and [e.checkin for e in state.memory.unwritten] == [1]
    assert not (run.dir / "STATUS.md").exists()


def test_a_live_check_in_reads_vllm_metrics_from_the_engine_behind_the_router(tmp_path):
    run = HRun(tmp_path)
    orchestrator = run.dir / "configs" / "orchestrator.json"
    config = json.loads(orchestrator.read_text())
    orchestrator.write_text(json.dumps({**config, "client": {"base_url": ["http://localhost:8000/v1"]}}))
    run.steps(12)
    http = FakeHttp(
        {
            "http://localhost:8000/metrics": "# the router exports no vllm: gauges\n",
            "http://localhost:8100/metrics": 'vllm:kv_cache_usage_perc{engine="0"} 0.42\n'
            "vllm:num_requests_running 3\nvllm:num_requests_waiting 7\n",
        }
    )
    effects = Effects(
        clock=FakeClock(run.clock),
        processes=FakeProcesses("Trainer", "Orchestrator"),
        host=FakeHost(ram_percent=63.0, disk=(0.125, 40.0)),
        http_get=http,
        status=MemoryStatus(),
    )
    monitor = Monitor(discover_run(run.dir), home=tmp_path / "home", effects=effects)
    try:
        state = monitor.check_in()
    finally:
        monitor.close()
    live = state.out.observation.live
    assert http.asked == ["http://localhost:8000/metrics", "http://localhost:8100/metrics"]
    assert live.vllm == {"kv_cache_usage_perc": 0.42, "num_requests_running": 3.0, "num_requests_waiting": 7.0}
    assert [p.role for p in live.processes] == ["Trainer", "Orchestrator"]
    performance = next(line for line in state.out.status_entry.splitlines() if line.startswith("**Performance**"))
    assert "inference KV cache 42.0%, 3 running, 7 waiting" in performance
    assert "host RAM 63%" in performance and "disk free 12.5% (40 GiB)" in performance


def test_an_unreachable_vllm_is_one_clear_error():
    with pytest.raises(OSError, match=r"vLLM /metrics at http://gpu-1:8000 not reachable \(\[Errno 111\] Connection refused\)"):
        probe_vllm("http://gpu-1:8000", 2.0, FakeHttp())


def test_the_launch_command_comes_from_the_processes_and_the_pane_history_is_only_a_guess(tmp_path):
    """Fault 11a (issue 12): the pane mixes typed commands with what the program printed, so a
    launch line there is shown for the person to confirm, never returned as the launch command."""
    run = HRun(tmp_path)
    info = RunInfo(run_dir=str(run.dir), layout="H", name=run.dir.name)
    wandb = LaunchCommand(
        argv=["uv", "run", "rl", "@", "rl.toml"], source=LaunchSource.WANDB_ARGS, detail="WANDB_ARGS of torchrun"
    )
    alive = Observation(now=START, offline=False, live=LiveProbes(processes=processes("Trainer")))
    state = CheckinState(run=info, checkin=1, out=CheckinOutput(observation=alive))
    pane = FakePane(lines=[f"user@host:~/prime-rl$ uv run rl @ configs/rl.toml --run.name {run.dir.name}", "14:02:31 INFO ..."])
    deps = PlanDeps(target=TARGET, processes=FakeProcesses("Trainer", launch=wandb), open_pane=FakeTmux(pane))
    assert find_launch_command(state, deps) == (wandb, [])
    dead = state.model_copy(
        update={"out": CheckinOutput(observation=alive.model_copy(update={"live": LiveProbes(processes=[])}))}
    )
    found, tried = find_launch_command(dead, deps)
    assert found is None and deps.open_pane.opened == [TARGET]
    guess = tried[-1]
    assert f"uv run rl @ configs/rl.toml --run.name {run.dir.name}" in guess
    assert "may be it" in guess and "confirm it by passing it as --launch-command" in guess


def test_the_cadence_keeps_its_schedule_when_a_round_runs_late():
    clock = FakeClock(START)
    durations = iter([5, 70, 5, 5])
    started: list[float] = []

    def round_() -> None:
        started.append(clock.elapsed)
        clock.advance(next(durations))

    assert at_cadence(round_, 60, clock, max_rounds=4) == 4
    assert started == [0, 60, 130, 180]  # the late round pushes only itself; the next starts at once, then on schedule
    assert clock.slept == [55, 0.0, 45]
