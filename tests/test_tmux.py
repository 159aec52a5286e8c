"""The Launcher pane on real private tmux servers: literal typing, busy panes refuse a restart,
a missing server, session or window is a clear error and nothing is sent."""

import shlex
import sys

import pytest

from rlagent.graph.runner import ActionConfig, CannotSend, Effects, Monitor
from rlagent.models.actions import ApprovalMode, LaunchStatus, TmuxTarget
from rlagent.tools.clock import SystemClock
from rlagent.tools.layout import discover_run
from rlagent.tools.tmux import TmuxError, open_launcher

from launchkit import crashed_h_run, tmux_servers, wait_for  # noqa: F401

pytestmark = pytest.mark.tmux
LAUNCH = "uv run rl @ examples/reverse_text/rl.toml --run.name crashed-run"


def test_send_line_is_literal_and_busy_is_the_foreground_command(tmux_servers):  # noqa: F811
    tmux = tmux_servers()
    pane = tmux.pane()
    assert pane.busy_with() is None
    pane.send_line("echo 'C-c; $HOME' Enter && sleep 5")
    wait_for(lambda: pane.busy_with() == "sleep", 5, "sleep to run")
    assert "C-c; $HOME Enter" in tmux.text()  # key names and shell syntax arrived as typed
    pane.send_key("C-c")
    wait_for(lambda: pane.busy_with() is None, 5, "the shell prompt")


def test_missing_server_session_or_window_is_a_clear_error(tmux_servers):  # noqa: F811
    tmux = tmux_servers()
    with pytest.raises(TmuxError, match=r"no tmux session 'nope' .*sessions: prime-rl"):
        open_launcher(TmuxTarget(socket=tmux.socket, session="nope"))
    with pytest.raises(TmuxError, match=r"no window 'Launcher' in tmux session 'prime-rl' \(windows: Logs\)"):
        open_launcher(TmuxTarget(socket=tmux_servers(window="Logs").socket))
    with pytest.raises(TmuxError, match="no tmux server is running on socket 'rlagent-test-none'"):
        open_launcher(TmuxTarget(socket="rlagent-test-none"))


def _pending_monitor(tmp_path, target, **kwargs):
    run = crashed_h_run(tmp_path)
    actions = ActionConfig(approve=ApprovalMode.ASK, target=target, launch_command=LAUNCH, verify_timeout_s=2, verify_poll_s=0.2)
    monitor = Monitor(
        discover_run(run.dir),
        home=tmp_path / "home",
        effects=Effects(clock=SystemClock(lambda: run.clock)),
        actions=actions,
        **kwargs,
    )
    state = monitor.check_in()
    assert state.out.reviews[-1].agreed, state.out.reviews[-1].verdicts
    return run, monitor


def test_a_busy_launcher_pane_refuses_the_restart(tmp_path, tmux_servers):  # noqa: F811
    tmux = tmux_servers()
    tmux.type("sleep 30")
    wait_for(lambda: not tmux.idle(), 5, "sleep to run")
    run, monitor = _pending_monitor(tmp_path, tmux.target)
    request_id, request = monitor.pending()
    state = monitor.decide(True, by="test", request_id=request_id)
    assert state.out.launch.status is LaunchStatus.REFUSED and state.out.launch.sent is None
    assert "busy running `sleep`" in state.out.launch.note and "nothing sent" in state.out.launch.note
    assert request.command not in tmux.text() and "--resume.step" not in tmux.text()
    assert "busy running" in run.status().rsplit("## ", 1)[1] and state.memory.dispatches == []
    tmux.pane().send_key("C-c")


@pytest.mark.parametrize("where", ["session", "window"])
def test_a_missing_session_or_window_is_a_clear_error_and_nothing_is_sent(tmp_path, tmux_servers, where):  # noqa: F811
    tmux = tmux_servers()
    target = tmux.target.model_copy(update={where: "elsewhere"})
    run, monitor = _pending_monitor(tmp_path, target)
    request_id, _ = monitor.pending()
    with pytest.raises(CannotSend, match=f"no {'tmux session' if where == 'session' else 'window'} 'elsewhere'") as why:
        monitor.decide(True, by="test", request_id=request_id)
    assert "nothing sent, the decision is still pending" in str(why.value)
    assert monitor.pending()[0] == request_id  # the person can fix the target and answer again
    assert "<!-- rlagent:followup" not in run.status()  # nothing decided yet, so no follow-up entry
    assert "--resume.step" not in tmux.text()
    assert shlex.split(LAUNCH)[0] not in tmux.text()


def test_a_restart_that_does_not_come_back_is_reported_down(tmp_path, tmux_servers):  # noqa: F811
    tmux = tmux_servers()
    run = crashed_h_run(tmp_path)
    fails = ActionConfig(
        approve=ApprovalMode.ASK,
        target=tmux.target,
        launch_command=f"{sys.executable} -c 'import time; time.sleep(0.5)'",
        verify_timeout_s=20,
        verify_poll_s=0.1,
    )
    monitor = Monitor(
        discover_run(run.dir), home=tmp_path / "home", effects=Effects(clock=SystemClock(lambda: run.clock)), actions=fails
    )
    monitor.check_in()
    request_id, request = monitor.pending()
    state = monitor.decide(True, by="test", request_id=request_id)
    assert state.out.launch.status is LaunchStatus.SENT and state.out.launch.sent == request.command
    assert not state.out.launch.verification.ok and "the command exited" in state.out.launch.note
    followup = run.status().rsplit("## ", 1)[1]
    assert "**Health**: Down" in followup and "restart failed" in followup and "FAILED processes_back" in followup
    assert state.memory.dispatches[-1].verified is False


def test_a_monitor_dying_after_the_send_never_sends_twice(tmp_path, tmux_servers):  # noqa: F811
    tmux = tmux_servers()
    run = crashed_h_run(tmp_path)

    def die_after_send(line):
        if line.startswith("sent to"):
            raise KeyboardInterrupt  # the monitor is stopped between the keys and its checkpoint

    actions = dict(approve=ApprovalMode.ASK, target=tmux.target, launch_command="echo rlagent-probe", verify_timeout_s=0.5)
    dying = Monitor(
        discover_run(run.dir),
        home=tmp_path / "home",
        effects=Effects(clock=SystemClock(lambda: run.clock)),
        actions=ActionConfig(**actions, notify=die_after_send),
    )
    dying.check_in()
    request_id, request = dying.pending()
    with pytest.raises(KeyboardInterrupt):
        dying.decide(True, by="test", request_id=request_id)
    dying.close()
    wait_for(lambda: request.command in tmux.text(), 5, "the command in the pane")
    assert "followup" not in run.status()

    again = Monitor(
        discover_run(run.dir),
        home=tmp_path / "home",
        effects=Effects(clock=SystemClock(lambda: run.clock)),
        actions=ActionConfig(**actions),
    )
    state = again.check_in()  # first finishes the sent decision from its write-ahead record, then checks in
    assert state.checkin == 2 and state.memory.dispatches[-1].checkin == 1
    assert tmux.text().count(request.command) == 1 and run.status().count("<!-- rlagent:followup") == 1
    assert "already sent" not in run.status() and f"  ```\n  {request.command}\n  ```" in run.status()
