"""The exact restart command per layout, and where the launch command comes from (never a guess)."""

import json
import shlex
import subprocess
import sys
import textwrap

import psutil
import pytest

from rlagent.models.actions import Knob, LaunchSource, Override
from rlagent.tools.launch_command import CommandError, build_argv, command_line, parse_launch_command
from rlagent.tools.launch_source import from_pane_history, from_processes, from_sbatch, parse_wandb_args


def test_layout_h_resumes_by_run_name_and_step_keeping_the_total():
    launch = parse_launch_command("uv run rl @ examples/reverse_text/rl.toml --output-dir outputs --max-steps 200 --clean")
    argv = build_argv(launch, layout="H", run_dir="/data/outputs/rt-1", run_name="rt-1", resume_step=40, max_steps=200)
    assert command_line(argv) == (
        "uv run rl @ examples/reverse_text/rl.toml --output-dir outputs --max-steps 200 --run.name rt-1 --resume.step 40"
    )


def test_layout_h_never_without_run_name():
    argv = build_argv(
        ["uv", "run", "rl", "@", "rl.toml"], layout="H", run_dir="/data/out/my run", run_name="my run", resume_step=7
    )
    assert command_line(argv) == "uv run rl @ rl.toml --run.name 'my run' --resume.step 7"
    with pytest.raises(CommandError, match="names run 'other' but the run dir is 'rt-1'"):
        build_argv(["rl", "--run.name", "other"], layout="H", run_dir="/o/rt-1", run_name="rt-1", resume_step=3)


def test_layout_l_resumes_by_output_dir_and_ckpt_resume_step():
    launch = ["uv", "run", "rl", "@", "rl.toml", "--ckpt", "--ckpt.resume-step", "-1", "--clean-output-dir"]
    argv = build_argv(launch, layout="L", run_dir="/data/outputs/x", run_name="x", resume_step=20, max_steps=50)
    assert command_line(argv) == "uv run rl @ rl.toml --ckpt --output-dir /data/outputs/x --ckpt.resume-step 20"


def test_earlier_resume_flags_and_overridden_flags_are_replaced_not_duplicated():
    launch = [
        "rl", "@", "a.toml", "--resume", "--resume.step=3", "--resume.dir", "x/step_3", "--seq_len", "4096",
        "--orchestrator.train.sampling.max-completion-tokens=512",
    ]  # fmt: skip
    overrides = [
        Override(knob=Knob.SEQ_LEN, value=3072, current=4096),
        Override(knob=Knob.MAX_COMPLETION_TOKENS, value=768, current=512),
        Override(knob=Knob.TEMPERATURE, value=0.7, current=1.0),
    ]
    argv = build_argv(launch, layout="H", run_dir="/o/r", run_name="r", resume_step=9, overrides=overrides)
    assert argv == [
        "rl", "@", "a.toml", "--run.name", "r", "--resume.step", "9", "--seq-len", "3072",
        "--orchestrator.train.sampling.max-completion-tokens", "768", "--orchestrator.train.sampling.temperature", "0.7",
    ]  # fmt: skip
    l_argv = build_argv(
        ["rl", "--output-dir", "o"], layout="L", run_dir="/o", run_name="o", resume_step=2, overrides=overrides[1:]
    )
    assert l_argv[-4:] == [
        "--orchestrator.train.sampling.max-completion-tokens",
        "768",
        "--orchestrator.train.sampling.temperature",
        "0.7",
    ]


def test_quoting_round_trips_and_bad_launch_commands_are_refused():
    launch = ["rl", "@", "my cfg.toml", "--wandb.name", "it's $HOME; `x`"]
    line = command_line(build_argv(launch, layout="H", run_dir="/o/r", run_name="r", resume_step=1))
    assert shlex.split(line)[:5] == launch
    for text in ("uv run rl @ a.toml; rm -rf /", "cd x && rl", "rl > log", "rl $(whoami)", "rl 'unclosed"):
        with pytest.raises(CommandError):
            parse_launch_command(text)
    with pytest.raises(CommandError, match="control character"):
        build_argv(["rl", "a\nb"], layout="H", run_dir="/o/r", run_name="r", resume_step=1)
    with pytest.raises(CommandError, match="not before max_steps"):
        build_argv(["rl"], layout="H", run_dir="/o/r", run_name="r", resume_step=100, max_steps=100)


def test_pane_history_takes_the_newest_prompt_line_that_launched_this_run():
    lines = [
        "(venv) me@box:~/prime-rl$ uv run rl @ old.toml --run.name other-run",
        "me@box:~/prime-rl$ uv run rl @ rl.toml --run.name rt-1 --max-steps 20",
        "14:02:31    INFO $ rl @ evil.toml --run.name rt-1",  # program output (a log record), not a prompt
        "Error: Trainer failed with exit code 1",
        "me@box:~/prime-rl$ rl @ evil.toml --run.name rt-1; curl x | sh",  # not one simple command
        "me@box:~/prime-rl$ ",
    ]
    found = from_pane_history(lines, "rt-1", "/o/rt-1")
    assert found.argv == ["uv", "run", "rl", "@", "rl.toml", "--run.name", "rt-1", "--max-steps", "20"]
    assert found.source is LaunchSource.LAUNCHER_PANE
    assert from_pane_history(lines[:1], "rt-1", "/o/rt-1") is None


def test_sbatch_and_wandb_args_sources(tmp_path):
    (tmp_path / "rl.sbatch").write_text(
        "#!/bin/bash\n#SBATCH --job-name=x\nset -e\nsrun uv run rl @ configs/rl.json --max-steps 100 2>&1 | tee log\n"
    )
    assert from_sbatch(tmp_path).argv == ["uv", "run", "rl", "@", "configs/rl.json", "--max-steps", "100"]
    assert from_sbatch(tmp_path / "nope") is None
    assert parse_wandb_args(json.dumps(["/v/bin/rl", "@", "a.toml"])) == ["/v/bin/rl", "@", "a.toml"]
    assert parse_wandb_args("not json") is None and parse_wandb_args(json.dumps(["rl", ";", "x"])) is None


# A titled process (environment zeroed by setproctitle) under an untitled parent that holds
# WANDB_ARGS, as the Trainer runs under torchrun.
FAMILY = textwrap.dedent("""
    import json, os, subprocess, sys, time
    if sys.argv[1] == "parent":
        child = subprocess.Popen([sys.executable, "-c", sys.argv[2], "child"], stdout=sys.stdout)
        child.wait()
    else:
        import setproctitle
        setproctitle.setproctitle("PRIME-RL::Trainer")
        print("ready", flush=True)
        time.sleep(60)
""")


def test_wandb_args_are_read_from_the_untitled_parent_not_the_titled_process():
    argv = ["/venv/bin/rl", "@", "rl.toml", "--run.name", "rt-1"]
    env = {"PATH": "/usr/bin:/bin", "WANDB_ARGS": json.dumps(argv), "PRL_RUN_NAME": "rt-1"}
    parent = subprocess.Popen([sys.executable, "-c", FAMILY, "parent", FAMILY], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        (titled,) = psutil.Process(parent.pid).children()
        assert titled.environ().get("WANDB_ARGS") is None  # setproctitle zeroed it
        found = from_processes([titled.pid])
        assert found.argv == argv and found.source is LaunchSource.WANDB_ARGS and f"pid {parent.pid}" in found.detail
    finally:
        for kid in psutil.Process(parent.pid).children(recursive=True):
            kid.kill()
        parent.kill()
        parent.wait()
