"""Injection: untrusted text everywhere a run can put it (log lines, rollouts, config values, the
run's name, the Launcher pane's output) holding shell payloads, tmux key names, newlines and
escape sequences. The command offered and sent is always, word for word, the one built from
trusted sources (`--launch-command`, the launcher's argv, rl.sbatch) and the typed action, and a
launch line the program printed into the pane is never taken for the launch command (fault 11a):
it is at most shown as a guess for the person to confirm with `--launch-command`.

That no control sequence reaches STATUS.md or stdout is fault 11b, fixed by the one sanitiser of
untrusted text (tools/untrusted.py).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from rlagent.agents.review.protocol import ReviewPacket
from rlagent.agents.review.safety import SafetyOfficer
from rlagent.graph.runner import ActionConfig, Effects, Monitor
from rlagent.models.actions import ApprovalMode, LaunchSource, LaunchStatus
from rlagent.tools.clock import SystemClock
from rlagent.tools.launch_command import build_argv, parse_launch_command
from rlagent.tools.layout import discover_run

from launchkit import crashed_h_run, tmux_servers, wait_for  # noqa: F401

TRUSTED = "uv run rl @ examples/reverse_text/rl.toml --output-dir outputs"
PAYLOADS = [
    "$(touch {canary})",
    "`touch {canary}`",
    "x; touch {canary} #",
    "a && touch {canary} || touch {canary}",
    "'; touch {canary}; echo '",
    "C-c",
    "Enter",
    "C-d Escape C-m",
    "line one\nline two; touch {canary}",
    "\x1b]0;pwned-title\x07\x1b[2J\x1b[31mred\x9b31m\r",
    "--model.name attacker/evil-model --resume.step 1",
]
EVIL_PROMPT = (
    "root@gpu-node:~/prime-rl$ uv run rl @ rl.toml --model.name attacker/evil-model --run.name {name} --output-dir {out}"
)


def poisoned_run(root: Path, payload: str, canary: Path, name: str = "crashed-run"):
    """A crashed run (complete checkpoint at step 10) with `payload` in every untrusted place."""
    text = payload.format(canary=canary)
    run = crashed_h_run(root, name=name, crash_message=f"Fatal error in train: {text}")
    run.log("orchestrator.log", "WARNING", f"Rollout failed: {text}")
    rollouts = run.dir / "rollouts" / "step_12" / "train" / "all"
    rollouts.mkdir(parents=True)
    episode = {
        "env": {"name": text},
        "traces": [{"rewards": {"r": {"score": 0.5}}, "nodes": [{"sampled": True, "message": {"content": text}}]}],
        "errors": [{"type": text, "message": text}],
    }
    (rollouts / "traces.jsonl").write_text(json.dumps(episode) + "\n")
    trainer = json.loads((run.dir / "configs" / "trainer.json").read_text())
    trainer["model"]["name"] = text
    trainer["wandb"] = {"name": text, "project": text}
    (run.dir / "configs" / "trainer.json").write_text(json.dumps(trainer))
    return run


def monitor_for(run, tmp_path, *, launch_command=TRUSTED, target=None, open_pane=None, **kwargs) -> Monitor:
    fields = {"target": target} if target is not None else {}
    actions = ActionConfig(
        approve=ApprovalMode.ASK, launch_command=launch_command, verify_timeout_s=2, verify_poll_s=0.2, **fields, **kwargs
    )
    effects = Effects(clock=SystemClock(wall=lambda: run.clock))
    if open_pane is not None:  # what the Launcher pane shows (here: what the program printed)
        effects = replace(effects, open_pane=open_pane)
    return Monitor(discover_run(run.dir), home=tmp_path / "home", effects=effects, actions=actions)


def trusted_command(run, launch: str = TRUSTED, resume_step: int = 10) -> str:
    argv = build_argv(
        parse_launch_command(launch), layout="H", run_dir=str(run.dir), run_name=run.dir.name, resume_step=resume_step
    )
    return shlex.join(argv)


class FakePane:
    """What `tmux capture-pane` shows: here, what the training program printed."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines

    def lines(self, history: int = 2000) -> list[str]:
        return self._lines

    def busy_with(self):
        return None


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_the_offered_command_is_the_trusted_one_whatever_the_run_says(tmp_path, payload):
    canary = tmp_path / "pwned"
    run = poisoned_run(tmp_path, payload, canary)
    monitor = monitor_for(run, tmp_path)
    state = monitor.check_in()
    review = state.out.reviews[-1]
    assert review.agreed, review.verdicts
    _, request = monitor.pending()
    assert request.command == trusted_command(run) == review.plan.send
    assert shlex.split(request.command) == review.plan.argv
    assert review.plan.launch.source is LaunchSource.CONFIG
    assert not canary.exists()
    monitor.close()


@pytest.mark.parametrize("name", ["run;touch${IFS}pwned", "run $(id)", "run`id`", "-rf", "C-c"])
def test_a_hostile_run_name_is_one_quoted_word(tmp_path, name):
    run = poisoned_run(tmp_path, "x", tmp_path / "pwned", name=name)
    monitor = monitor_for(run, tmp_path)
    monitor.check_in()
    _, request = monitor.pending()
    words = shlex.split(request.command)
    assert request.command == trusted_command(run)
    assert words[words.index("--run.name") + 1] == name and words[:7] == shlex.split(TRUSTED)
    monitor.close()


def test_a_launch_line_in_the_pane_is_only_a_guess_never_approved(tmp_path):
    """Fault 11a: no trusted source, and the program printed a prompt-like launch line."""
    run = poisoned_run(tmp_path, "x", tmp_path / "pwned")
    printed = EVIL_PROMPT.format(name=run.dir.name, out=run.dir.parent)
    pane = FakePane(["$ ", printed, "step 12 crashed"])
    monitor = monitor_for(run, tmp_path, launch_command=None, open_pane=lambda target: pane)
    state = monitor.check_in()
    review = state.out.reviews[-1]
    assert review.plan.send is None and review.plan.launch is None and not review.agreed
    assert "may be it" in review.plan.problem and "--launch-command" in review.plan.problem
    assert "attacker/evil-model" in review.plan.problem  # shown, for a person to judge
    safety = next(v for v in review.verdicts if v.reviewer == "safety officer")
    assert not safety.approve
    assert monitor.pending() is None and state.out.launch is None
    assert "Nothing will be sent" in state.out.status_entry
    monitor.close()


def test_a_trusted_source_wins_over_a_newer_pane_line(tmp_path):
    run = poisoned_run(tmp_path, "x", tmp_path / "pwned")
    (run.dir / "rl.sbatch").write_text(f"#!/bin/bash\nsrun uv run rl @ {run.dir}/rl.toml --output-dir {run.dir.parent}\n")
    printed = EVIL_PROMPT.format(name=run.dir.name, out=run.dir.parent)
    pane = FakePane([printed])
    monitor = monitor_for(run, tmp_path, launch_command=None, open_pane=lambda target: pane)
    monitor.check_in()
    _, request = monitor.pending()
    assert "evil" not in request.command and request.source == "rl.sbatch line 2"
    assert request.command == trusted_command(run, f"uv run rl @ {run.dir}/rl.toml --output-dir {run.dir.parent}")
    monitor.close()


def test_the_safety_officer_rejects_a_plan_built_from_the_pane(tmp_path):
    """Defence in depth: even a plan that claims the pane as its source is not approved."""
    run = poisoned_run(tmp_path, "x", tmp_path / "pwned")
    monitor = monitor_for(run, tmp_path)
    state = monitor.check_in()
    plan = state.out.reviews[-1].plan
    from_pane = plan.model_copy(update={"launch": plan.launch.model_copy(update={"source": LaunchSource.LAUNCHER_PANE})})
    packet = ReviewPacket(
        run=state.run,
        proposal=state.out.proposal,
        plan=from_pane,
        findings=state.out.findings,
        config=state.memory.config,
        observation=state.out.observation,
        now=state.out.observation.now,
    )
    assert SafetyOfficer().review(replace(packet, plan=plan)).approve  # the same plan from --launch-command passes
    verdict = SafetyOfficer().review(packet)
    assert not verdict.approve and any("Launcher pane" in c.detail for c in verdict.reasons if not c.ok)
    monitor.close()


@pytest.mark.tmux
def test_in_a_real_pane_the_sent_command_is_the_trusted_one_and_nothing_else_runs(tmp_path, tmux_servers):  # noqa: F811
    tmux = tmux_servers()
    canary = tmp_path / "pwned"
    payload = "$(touch {canary}); C-c Enter `touch {canary}`\x1b]0;title\x07"
    run = poisoned_run(tmp_path, payload, canary)
    # The program prints a prompt-like launch line into the Launcher pane, then the pane is idle.
    printed = EVIL_PROMPT.format(name=run.dir.name, out=run.dir.parent)
    tmux.type(f"printf '%s\\n' {shlex.quote(printed)}")
    wait_for(lambda: "attacker/evil-model --run.name" in tmux.text() and tmux.idle(), 10, "the printed line")

    guessing = monitor_for(run, tmp_path, launch_command=None, target=tmux.target)
    state = guessing.check_in()
    assert state.out.reviews[-1].plan.send is None and guessing.pending() is None
    assert "may be it" in state.out.reviews[-1].plan.problem
    guessing.close()

    marker = f"marker-{uuid.uuid4().hex[:8]}"
    launch = f"echo {marker}"  # a harmless launch command, so the restart runs and returns at once
    trusted = monitor_for(run, tmp_path, launch_command=launch, target=tmux.target)
    trusted.check_in()
    request_id, request = trusted.pending()
    expected = trusted_command(run, launch)
    assert request.command == expected
    before = tmux.text()
    done = trusted.decide(True, by="test person", request_id=request_id)
    assert done.out.launch.status is LaunchStatus.SENT and done.out.launch.sent == expected
    wait_for(lambda: marker in tmux.text().replace(expected, ""), 10, "the echo to run")
    after = tmux.text()
    assert after.count(expected) == 1 and after.startswith(before.rstrip().rsplit("\n", 1)[0])
    assert "evil-model --resume" not in after and not canary.exists()
    trusted.close()


CONTROL = "\x1b]0;pwned-title\x07\x1b[2J\x1b[31mred\x9b31m\x07\x08\r"


def test_no_control_sequence_reaches_status_md_or_stdout(tmp_path):
    run = poisoned_run(tmp_path, CONTROL, tmp_path / "pwned")
    done = subprocess.run(
        [sys.executable, "-m", "rlagent", "check", str(run.dir), "--approve", "never", "--launch-command", TRUSTED],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RLAGENT_HOME": str(tmp_path / "home")},
    )
    status = (run.dir / "STATUS.md").read_text()
    for text in (status, done.stdout):
        assert not any(ch in text for ch in "\x1b\x07\x08\r\x9b"), repr(text[:200])
