"""Live SIMULATED verl, TRL and OpenRLHF runs are real process trees titled as the frameworks' are, write their
files as they go, crash with the framework's exit code, and resume with the framework's own flag from the
newest checkpoint. Every test is bounded in time and leaves no process behind."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from rlagent.tools.frameworks import lines, openrlhf, trl, verl

RLAGENT = [sys.executable, "-m", "rlagent", "simulate"]
SPEED = "400"
"""Simulated seconds per real second: a ~60 s step takes 0.15 s."""


def watch(args: list[str], timeout: float = 60.0) -> tuple[int, dict[int, set[tuple[str, str]]], str]:
    """Run `rlagent simulate ... --live`, recording every process of its tree (titles, cwd) while it runs."""
    proc = subprocess.Popen([*RLAGENT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen: dict[int, set[tuple[str, str]]] = {}
    deadline = time.time() + timeout
    try:
        while proc.poll() is None:
            if time.time() > deadline:
                raise AssertionError(f"live run did not end within {timeout}s")
            try:
                root = psutil.Process(proc.pid)
                for p in [root, *root.children(recursive=True)]:
                    title = " ".join(p.cmdline()).strip()
                    if title:
                        seen.setdefault(p.pid, set()).add((title, p.cwd()))
            except psutil.Error:
                pass
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
    _, err = proc.communicate(timeout=10)
    return proc.returncode, seen, err.decode()


def kill_tree(pid: int) -> None:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(procs, timeout=5)


def leftovers(seen: dict[int, set[tuple[str, str]]]) -> list[str]:
    """Processes of the tree still running (a zombie or a reused pid with another title does not count)."""
    alive = []
    for pid, states in seen.items():
        try:
            now = " ".join(psutil.Process(pid).cmdline()).strip()
        except psutil.Error:
            continue
        if now and now in {title for title, _ in states}:
            alive.append(now)
    return alive


def titles(seen: dict[int, set[tuple[str, str]]]) -> list[str]:
    return [title for states in seen.values() for title, _ in states]


CASES = [
    pytest.param(
        "verl-crash-oom",
        [],
        ("python3 -m verl.trainer.main_ppo ", "ray::TaskRunner.run", "ray::WorkerDict"),
        id="verl",
    ),
    pytest.param(
        "trl-crash-oom",
        ["--resume_from_checkpoint", "true"],
        ("accelerate launch --config_file zero2.yaml", "-u train_grpo.py --config grpo_config.yaml"),
        id="trl",
    ),
    pytest.param(
        "openrlhf-crash-oom",
        ["--ckpt.load_enable"],
        ("python3 -m openrlhf.cli.train_ppo_ray ", "ray::PPOTrainer.fit", "ray::PolicyModelActor", "ray::RolloutRayActor"),
        id="openrlhf",
    ),
]


@pytest.mark.parametrize(("name", "resume", "expected_titles"), CASES)
def test_live_run_crashes_then_resumes_from_its_newest_checkpoint(tmp_path, name, resume, expected_titles):
    run = tmp_path / "run"
    code, seen, err = watch([name, str(run), "--live", "--speed", SPEED, "--steps", "16", "--onset", "13"])
    assert code == 1, err
    found = titles(seen)
    for title in expected_titles:
        assert any(title in t for t in found), (title, found)
    assert len(seen) >= 3  # the launch command and its framework processes
    retitled = [cwd for states in seen.values() for title, cwd in states if not title.startswith(sys.executable)]
    assert set(retitled) == {str(run.resolve())}  # the frameworks' processes run in the launch directory
    assert leftovers(seen) == []

    log = lines.read_text(run / ("verl_demo.log" if name.startswith("verl") else "train.log"))
    named = {int(p) for p in re.findall(r"\bpid[=:] ?(\d+)", log)}
    assert named and named <= set(seen), "the logs name the pids of the processes that ran"
    if name.startswith("verl"):
        assert "RayTaskError(OutOfMemoryError)" in log and "Error executing job with overrides" in log
        assert (
            run / "checkpoints/verl_grpo_example_gsm8k/qwen2_5_0_5b_instruct_function_rm/latest_checkpointed_iteration.txt"
        ).read_text() == "10"
    elif name.startswith("trl"):
        assert "ChildFailedError" in log and "rank      : 1 (local_rank: 1)" in log
    else:
        assert "ray::PolicyModelActor.fit()" in log and "CUDA out of memory" in log

    # a relaunch without the resume flag: verl resumes (resume_mode defaults to auto), the others refuse
    if resume:
        refused = subprocess.run(
            [*RLAGENT, name, str(run), "--live", "--speed", SPEED], capture_output=True, text=True, timeout=60
        )
        assert refused.returncode == 2 and "would start it from scratch" in refused.stderr
    code, seen, err = watch([name, str(run), "--live", "--speed", SPEED, *resume])
    assert code == 0, err
    assert leftovers(seen) == []
    if name.startswith("verl"):
        log = lines.read_text(run / "verl_demo.log")
        assert "Setting global step to 10" in log and "Final validation metrics" in log
        steps = [r.step for r in verl.parse_console(log) if r.kind == "train"]
    elif name.startswith("trl"):
        log = lines.read_text(run / "train.log")
        rows = trl.parse_console(log)
        assert rows[-1].kind == "summary"
        assert trl.checkpoints(run / "Qwen2.5-0.5B-Instruct-GRPO").latest == 16
        assert sum(r.kind == "train" for r in rows) == 12 + 6  # TRL's console has no step: count the dicts
        return
    else:
        log = lines.read_text(run / "train.log")
        assert "checkpoint_states: {'episode': 0, 'global_step': 10" in log
        steps = [r.step for r in openrlhf.parse_console(log) if r.kind == "train"]
    assert steps == [*range(1, 13), *range(11, 17)]  # up to the crash, then again from the checkpoint


def test_sigterm_stops_the_whole_tree(tmp_path):
    proc = subprocess.Popen(
        [*RLAGENT, "openrlhf-healthy", str(tmp_path / "run"), "--live", "--speed", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.time() + 30
        children: list[psutil.Process] = []
        while time.time() < deadline and len(children) < 6:
            try:
                children = psutil.Process(proc.pid).children(recursive=True)
            except psutil.Error:
                break
            time.sleep(0.05)
        assert len(children) >= 6, "the framework's processes did not start"
        log = Path(tmp_path / "run" / "train.log")
        while time.time() < deadline and (not log.exists() or "Started a local Ray instance" not in log.read_text()):
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 1
        _gone, alive = psutil.wait_procs(children, timeout=10)
        assert not alive, [p.pid for p in alive]
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
        proc.communicate(timeout=10)
