"""A newcomer's first hour (issue 11): every command as a user types it, in a real process, and
what the user sees on stdout, stderr and in the exit status."""

import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import libtmux
import pytest
from markdown_it import MarkdownIt

from rlagent.tools.tmux import socket_file

from launchkit import crashed_h_run, wait_for

ROOT = Path(__file__).resolve().parent.parent
RLAGENT = [sys.executable, "-m", "rlagent"]
SCRIPT = Path(sys.executable).with_name("rlagent")
"""The console script a user types (`-m` would put the current directory first on sys.path)."""
LAUNCH = "uv run rl @ examples/reverse_text/rl.toml --max-steps 100"


def rlagent(*args, env=None, cwd=None, timeout=120, stdin=subprocess.DEVNULL):
    return subprocess.run([*RLAGENT, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd, stdin=stdin)


def one_error_line(done, status=None) -> str:
    """The failure as a user sees it: one `rlagent: error:` line on stderr, no traceback."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode != 0 if status is None else done.returncode == status, (done.returncode, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("rlagent: error: "), done.stderr
    return lines[0]


# ---- 1 and 2: a non-editable `pip install .` ------------------------------------------------


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The package as `pip install .` installs it (a wheel, not the checkout), with a console
    script `rlagent` that imports it; the venv's other packages serve as its dependencies."""
    base = tmp_path_factory.mktemp("installed")
    wheels, target, bin_dir = base / "wheels", base / "site", base / "bin"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr
    wheel = next(wheels.glob("rlagent-*.whl"))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert not (target / "rlagent" / "evals" / "fixtures").exists()  # not shipped: see evals/locate.py
    bin_dir.mkdir()
    script = bin_dir / "rlagent"
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom rlagent.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(target), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("RLAGENT_FIXTURES", None)
    return script, env


def test_installed_eval_and_replay_find_the_fixtures_or_say_how(installed, tmp_path):
    script, env = installed
    elsewhere = subprocess.run([str(script), "replay", "19_crash-oom-h"], capture_output=True, text=True, env=env, cwd=tmp_path)
    line = one_error_line(elsewhere, 2)
    assert "--fixtures DIR" in line and "RLAGENT_FIXTURES" in line and "clone" in line
    assert one_error_line(subprocess.run([str(script), "eval"], capture_output=True, text=True, env=env, cwd=tmp_path), 2)
    in_checkout = subprocess.run(
        [str(script), "replay", "19_crash-oom-h"], capture_output=True, text=True, env=env, cwd=ROOT / "examples", timeout=300
    )
    assert in_checkout.returncode == 0 and "as expected" in in_checkout.stdout, in_checkout.stderr
    fixtures = ROOT / "evals" / "fixtures"
    by_env = subprocess.run(
        [str(script), "eval", "02_healthy-l", "--json"],
        capture_output=True,
        text=True,
        env={**env, "RLAGENT_FIXTURES": str(fixtures)},
        cwd=tmp_path,
        timeout=300,
    )
    assert by_env.returncode == 0 and json.loads(by_env.stdout)["fixtures"] == 1, by_env.stderr
    by_flag = subprocess.run(
        [str(script), "replay", "02_healthy-l", "--fixtures", str(fixtures)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert by_flag.returncode == 0, by_flag.stderr


@pytest.mark.tmux
def test_installed_demo_from_the_checkout_root_runs_its_simulated_run(installed, tmp_path):
    script, env = installed
    done = subprocess.run(
        [str(script), "demo", "--answer", "no", "--step-seconds", "0.1"],
        capture_output=True,
        text=True,
        env={**env, "TMPDIR": str(tmp_path)},
        cwd=ROOT,  # `python -m rlagent` here would import the source folder rlagent/
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "run_crashed" in done.stdout and "declined" in done.stdout


@pytest.mark.tmux
def test_a_demo_child_that_fails_at_once_is_reported_at_once(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "sitecustomize.py").write_text(
        "import sys\nif 'simulate' in sys.argv:\n    raise SystemExit('ModuleNotFoundError: the child cannot start')\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": f"{broken}:{os.environ.get('PYTHONPATH', '')}"}
    started = time.monotonic()
    done = subprocess.run([str(SCRIPT), "demo", "--answer", "no"], capture_output=True, text=True, env=env, timeout=60)
    assert time.monotonic() - started < 30
    assert done.returncode == 1 and done.stderr.startswith("rlagent: error: the simulated run ended at once")
    quoted = done.stderr.splitlines()[1:]  # the child's own output, quoted from its tmux window
    assert quoted and all(line.startswith("  | ") for line in quoted)
    assert "the child cannot start" in done.stderr


# ---- 3: one top-level handler ----------------------------------------------------------------


def test_expected_failures_are_one_error_line(tmp_path):
    assert "/proc/x" in one_error_line(rlagent("simulate", "healthy-h", "/proc/x"), 1)
    (tmp_path / "afile.txt").write_text("x")
    assert "Not a directory" in one_error_line(rlagent("simulate", "healthy-h", str(tmp_path / "afile.txt" / "sub")), 1)
    no_tmux = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # python, but no tmux
    assert "needs tmux" in one_error_line(rlagent("demo", "--answer", "no", env=no_tmux))


def test_ctrl_c_while_rlagent_starts_is_no_traceback(tmp_path):
    run = crashed_h_run(tmp_path)
    for delay in (0.3, 0.6, 1.0, 1.5):  # Python's own start (~0.05 s) is before any code of rlagent
        proc = subprocess.Popen(
            [str(SCRIPT), "run", str(run.dir), "--offline", "--home", str(tmp_path / "home")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, (delay, err)
        assert proc.returncode in (130, -signal.SIGINT), (delay, proc.returncode, err)


# ---- 4, 5, 10, 11, 12: what a check-in says ------------------------------------------------


def test_the_step_of_a_resumed_run_comes_from_its_newest_attempt(tmp_path):
    home = ["--home", str(tmp_path / "home")]
    assert rlagent("simulate", "crash-python-h", str(tmp_path / "out"), "--run.name", "r", "--steps", "19").returncode == 0
    run = tmp_path / "out" / "r"
    first = json.loads(rlagent("check", str(run), "--offline", "--json", *home).stdout)
    assert first["step"] == 19
    resumed = rlagent(
        "simulate", "crash-python-h", str(tmp_path / "out"), "--run.name", "r", "--resume.step", "10", "--steps", "14"
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "Step 14 " in (run / "logs" / "attempt_2" / "trainer.log").read_text()
    second = json.loads(rlagent("check", str(run), "--offline", "--json", *home).stdout)
    assert second["step"] == 14 and "**Step**: 14 / " in second["status_entry"]


def test_a_run_of_random_bytes_is_not_healthy(tmp_path):
    run = tmp_path / "junk"
    for rel in ("configs/rl.toml", "logs/trainer.log", "logs/orchestrator.log", "metrics.jsonl"):
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_bytes(os.urandom(4000).replace(b"\n", b"\x00"))
    done = rlagent("check", str(run), "--offline", "--json", "--home", str(tmp_path / "home"))
    report = json.loads(done.stdout)
    assert report["health"] != "Healthy" and any(n.startswith("nothing could be read") for n in report["notes"])
    assert "nothing could be read" in one_error_line(done, 1)


def test_a_long_simulated_healthy_run_stays_quiet_about_its_disk(tmp_path):
    made = rlagent("simulate", "healthy-h", str(tmp_path / "run"), "--steps", "600")
    assert made.returncode == 0 and "a check-in should report: no warning" in made.stdout, made.stderr
    report = json.loads(rlagent("check", str(tmp_path / "run"), "--offline", "--json", "--home", str(tmp_path / "h")).stdout)
    assert "disk_low" not in {f["id"] for f in report["findings"]}
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if "disk" in line]
    assert min(r["system/ckpt_disk_free_ratio"] for r in rows if "system/ckpt_disk_free_ratio" in r) > 0.1


def test_offline_a_crash_gets_one_line_on_what_a_live_monitor_would_propose(tmp_path):
    assert rlagent("simulate", "crash-python-h", str(tmp_path / "run")).returncode == 0
    report = json.loads(rlagent("check", str(tmp_path / "run"), "--offline", "--json", "--home", str(tmp_path / "h")).stdout)
    entry = report["status_entry"]
    assert "run_crashed" in {f["id"] for f in report["findings"]}
    assert entry.count("A live monitor would propose **restart") == 1 and "(offline: nothing is reviewed or sent)" in entry
    for block in ("Review round", "evidence auditor", "Command for", "Not offered for approval"):
        assert block not in entry


def test_rechecking_adds_nothing_new_and_no_write_is_a_preview(tmp_path):
    shutil.copytree(ROOT / "examples" / "runs" / "reverse-text-l", tmp_path / "run")
    (tmp_path / "run" / "STATUS.md").unlink(missing_ok=True)
    home = ["--home", str(tmp_path / "home")]
    first = rlagent("check", str(tmp_path / "run"), "--offline", *home)
    assert first.returncode == 0 and "appended to" in first.stdout
    preview = rlagent("check", str(tmp_path / "run"), "--offline", "--no-write", *home)
    assert "check-in #2" in preview.stdout and "--no-write" in preview.stdout
    again = rlagent("check", str(tmp_path / "run"), "--offline", *home)
    assert "check-in #2" in again.stdout and "unchanged: nothing new" in again.stdout
    status = (tmp_path / "run" / "STATUS.md").read_text()
    assert status.count("<!-- rlagent:checkin") == 2  # the header and one entry
    assert rlagent("check", str(tmp_path / "run"), "--offline", *home).stdout.count("check-in #3") == 1


def test_a_check_in_finished_after_ctrl_c_prints_no_internal_log_line(tmp_path):
    from rlagent.graph.runner import Monitor
    from rlagent.tools.layout import discover_run

    run = crashed_h_run(tmp_path)
    monitor = Monitor(discover_run(run.dir), home=tmp_path / "home", offline=True)
    real = monitor.nodes.diagnostician

    def interrupted(state):
        raise KeyboardInterrupt

    object.__setattr__(monitor.nodes, "diagnostician", interrupted)
    from rlagent.graph.build import build_graph

    monitor.graph = build_graph(monitor.nodes, monitor.saver)
    with pytest.raises(KeyboardInterrupt):
        monitor.check_in()
    monitor.close()
    assert real is not None
    done = rlagent("check", str(run.dir), "--offline", "--home", str(tmp_path / "home"))
    assert done.returncode == 0 and "finishing check-in" not in done.stderr and "WARNING" not in done.stderr, done.stderr


# ---- 6 and 9: approve ------------------------------------------------------------------------


def _tmux(socket: str) -> libtmux.Server:
    server = libtmux.Server(socket_name=socket)
    server.new_session(session_name="prime-rl", window_name="Launcher", detach=True, window_command="bash --norc --noprofile")
    return server


@pytest.mark.tmux
def test_approve_failures_exit_non_zero_and_keep_the_decision(tmp_path):
    socket = f"rlagent-newcomer-{os.getpid()}"
    server = _tmux(socket)
    try:
        run = crashed_h_run(tmp_path)
        env = {**os.environ, "RLAGENT_HOME": str(tmp_path / "home")}
        check = rlagent("check", str(run.dir), "--tmux-socket", socket, "--launch-command", LAUNCH, env=env)
        assert check.returncode == 0 and f"rlagent approve {run.dir.resolve()} --yes" in check.stdout, check.stderr
        again = rlagent("check", str(run.dir), env=env)
        assert f"rlagent approve {run.dir.resolve()} --yes" in again.stdout and "RUN_DIR" not in again.stdout
        why = check.stdout.split("Why:", 1)[1].split("Review", 1)[0]
        summary = next(line for line in why.splitlines() if "run_crashed (critical)" in line).split(": ", 1)[1]
        assert why.count(summary) == 1  # the reason is not said twice

        other = rlagent("approve", str(run.dir), "--yes", "--tmux-socket", "elsewhere", env=env)
        assert "answer it with --no" in one_error_line(other, 2)
        server.kill()
        socket_file(socket).unlink(missing_ok=True)
        failed = rlagent("approve", str(run.dir), "--yes", "--tmux-socket", socket, env=env)
        line = one_error_line(failed, 1)
        assert "no tmux server is running on socket" in line and "still pending" in line
        assert "no tmux server on the default tmux server" not in failed.stderr
        status = rlagent("status", str(run.dir), env=env)
        assert "rlagent approve" in status.stdout and "nothing pending" not in status.stdout

        server = _tmux(socket)
        wait_for(lambda: server.sessions[0].windows[0].active_pane.pane_current_command == "bash", 10, "the shell")
        sent = rlagent("approve", str(run.dir), "--yes", "--verify-timeout", "3s", env=env)
        assert sent.returncode == 1, sent.stdout + sent.stderr  # sent, but `uv run rl` never brings the run back
        assert "sent to prime-rl:Launcher" in sent.stdout and "Traceback" not in sent.stderr and sent.stderr.strip()
        assert "nothing pending" in rlagent("status", str(run.dir), env=env).stdout
    finally:
        if server.is_alive():
            server.kill()
        socket_file(socket).unlink(missing_ok=True)


# ---- 7, 8, 9: errors and messages -------------------------------------------------------------


def test_a_status_file_that_cannot_be_written_is_an_error(tmp_path):
    run = crashed_h_run(tmp_path)
    (run.dir / "STATUS.md").mkdir()
    done = rlagent("run", str(run.dir), "--offline", "--max-checks", "1", "--home", str(tmp_path / "home"))
    assert done.returncode == 1 and "rlagent: error: check-in #1: STATUS.md could not be written" in done.stderr
    check = rlagent("check", str(run.dir), "--offline", "--json", "--home", str(tmp_path / "home2"))
    assert check.returncode == 1 and json.loads(check.stdout)["write_error"]


def test_eval_checks_its_arguments_before_replaying_anything():
    started = time.monotonic()
    missing = rlagent("eval", "nonexistent")
    assert "no fixture 'nonexistent'" in one_error_line(missing, 2) and "0/0" not in missing.stdout
    bogus = rlagent("eval", "--llm", "bogus")
    assert bogus.returncode == 2 and "--llm" in bogus.stderr and not bogus.stdout
    assert time.monotonic() - started < 30  # nothing was replayed


def test_messages_say_what_is_wrong(tmp_path):
    assert "--steps must be at least 1, not -5" in one_error_line(
        rlagent("simulate", "healthy-h", str(tmp_path / "r"), "--steps", "-5")
    )
    huge = rlagent("simulate", "healthy-h", str(tmp_path / "r"), "--steps", "99999999999999")  # wrote until the disk filled
    assert "--steps must be at most 1,000,000" in one_error_line(huge) and not (tmp_path / "r").exists()
    for scenario in ("healthy-h", "verl-healthy"):  # the timeline ticked through 1e308 s: it never ended
        slow = rlagent("simulate", scenario, str(tmp_path / "r"), "--step-time", "1e308")
        assert "step_time_s" in one_error_line(slow) and "at most a day (86400)" in one_error_line(slow)
    (tmp_path / "afile").write_text("x")
    assert "is a file, not a directory" in one_error_line(rlagent("simulate", "healthy-h", str(tmp_path / "afile")))
    os.mkfifo(tmp_path / "afifo")  # called "a file" before
    assert "afifo is a FIFO, not a directory" in one_error_line(rlagent("simulate", "healthy-h", str(tmp_path / "afifo")))
    (tmp_path / "empty" / "logs").mkdir(parents=True)
    line = one_error_line(rlagent("check", str(tmp_path / "empty")))
    assert "logs/ holds no latest, attempt_N or *.log yet" in line and "no configs/ or logs/" not in line
    bad = rlagent("check", str(tmp_path / "empty"), env={**os.environ, "RLAGENT_CADENCE": "soon"})
    assert "bad cadence" in one_error_line(bad) and "Value error" not in bad.stderr
    replay = rlagent("replay", "19_crash-oom-h")
    assert replay.returncode == 0 and "layout H (layout H" not in replay.stdout and "layout H (easy)" in replay.stdout
    from rlagent.agents import command_plan
    from rlagent.commands.common import step_text

    assert "titled ones')" not in Path(command_plan.__file__).read_text()
    assert step_text(None, 200) == "no step yet (of 200)" and step_text(5, None) == "step 5"


# ---- 13: STATUS.md rendered as Markdown --------------------------------------------------------

FIELDS = ("Step", "Health", "Progress", "Stability", "Performance", "Notes")


def test_the_runbook_fields_render_one_per_line_and_read_as_plain_text(tmp_path):
    shutil.copytree(ROOT / "examples" / "runs" / "reverse-text-l", tmp_path / "run")
    report = json.loads(rlagent("check", str(tmp_path / "run"), "--offline", "--json", "--home", str(tmp_path / "h")).stdout)
    entry = report["status_entry"]
    plain = [line.rstrip() for line in entry.splitlines()[1:7]]
    assert [line.split("**:")[0] for line in plain] == [f"**{f}" for f in FIELDS]
    for md in (
        MarkdownIt("commonmark"),
        MarkdownIt("gfm-like", options_update={"linkify": False}),
    ):  # GitHub: tables, strikethrough
        html = md.render(entry)
        paragraph = re.search(r"<p><strong>Step</strong>.*?</p>", html, re.S).group(0)
        for before, after in itertools.pairwise(FIELDS):
            assert re.search(rf"<strong>{before}</strong>:.*?<br />\s*<strong>{after}</strong>:", paragraph, re.S), (before, md)
    readme = (ROOT / "README.md").read_text()
    example = readme.split("```markdown\n", 1)[1].split("\n```", 1)[0]
    assert [line.split("**:")[0] for line in example.splitlines()[1:7]] == [f"**{f}" for f in FIELDS]
    assert all(line.endswith("  ") for line in example.splitlines()[1:6])


# ---- 14 and 15: help and README ---------------------------------------------------------------


def test_help_reads_well():
    bare = rlagent()
    assert bare.returncode == 0 and "Usage" in bare.stdout and "check" in bare.stdout
    assert re.fullmatch(r"rlagent \S+\n", rlagent("--version").stdout)
    top = rlagent("--help", env={**os.environ, "COLUMNS": "200"}).stdout
    demo_line = next(line for line in top.splitlines() if " demo " in line)
    assert "restarted (needs tmux)" in demo_line and "and on" not in demo_line
    check = rlagent("check", "--help", env={**os.environ, "COLUMNS": "200"}).stdout
    assert "<bool>" not in check and "RLAGENT_HOME" in check and "default: auto" in check
    assert "kept ." not in check


def test_readme_says_what_to_install_and_links_inside_the_repository():
    readme = (ROOT / "README.md").read_text()
    assert "python3-venv" in readme and "apt-get install" in readme and "tmux" in readme
    for link in re.findall(r"\]\(([^)#]+)\)", readme):
        if "://" not in link:
            assert (ROOT / link).resolve().is_relative_to(ROOT) and (ROOT / link).exists(), link


# ---- polish: progress, terminal rendering, doctor ---------------------------------------------


def test_terminal_rendering_colours_health_and_keeps_evidence_behind_full(tmp_path):
    shutil.copytree(ROOT / "examples" / "runs" / "reverse-text-l", tmp_path / "run")
    env = {**os.environ, "FORCE_COLOR": "1", "COLUMNS": "250"}
    args = ["check", str(tmp_path / "run"), "--offline", "--no-write", "--home", str(tmp_path / "h")]
    short = rlagent(*args, env=env).stdout
    full = rlagent(*args, "--full", env=env).stdout
    assert "\x1b[1;33mDegraded" in short and "\x1b[33m- [warning] `reward_regression`" in short
    assert "reward (10-step mean) @ step 21" not in short and "reward (10-step mean) @ step 21" in full
    piped = rlagent(*args).stdout
    assert "\x1b[" not in piped and "**Health**: Degraded" in piped and "reward (10-step mean) @ step 21" in piped


def test_progress_shows_on_a_terminal_and_not_in_pipes_or_json():
    env = {**os.environ, "FORCE_COLOR": "1", "TTY_INTERACTIVE": "1"}
    shown = rlagent("eval", "02_healthy-l", env=env)
    assert shown.returncode == 0 and "replaying fixtures" in shown.stderr
    quiet = rlagent("eval", "02_healthy-l", "--json", env=env)
    assert "replaying" not in quiet.stderr and json.loads(quiet.stdout)
    assert "replaying" not in rlagent("eval", "02_healthy-l").stderr


def test_run_says_where_entries_go_and_when_the_next_check_in_is(tmp_path):
    run = crashed_h_run(tmp_path)
    done = rlagent("run", str(run.dir), "--offline", "--cadence", "1s", "--max-checks", "2", "--home", str(tmp_path / "h"))
    assert done.returncode == 0, done.stderr
    assert f"entries go to {run.dir.resolve() / 'STATUS.md'}" in done.stdout
    assert done.stdout.count("next check-in at") == 1


@pytest.mark.tmux
def test_doctor_says_what_a_restart_needs(tmp_path):
    run = crashed_h_run(tmp_path)
    home = ["--home", str(tmp_path / "home")]
    socket = f"rlagent-doctor-{os.getpid()}"
    lacking = rlagent(
        "doctor",
        str(run.dir),
        "--tmux-socket",
        socket,
        "--llm",
        "claude",
        *home,
        env={k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"},
    )
    assert lacking.returncode == 1
    for text in ("tmux Launcher", "no tmux server is running", "launch command", "--launch-command", "ANTHROPIC_API_KEY"):
        assert text in lacking.stdout, text
    assert "newest complete at step 10" in lacking.stdout
    server = _tmux(socket)
    try:
        ready = rlagent("doctor", str(run.dir), "--tmux-socket", socket, "--launch-command", LAUNCH, "--llm", "off", *home)
        assert ready.returncode == 0, ready.stdout
        assert "is at a shell prompt" in ready.stdout and "from --launch-command" in ready.stdout and "ready:" in ready.stdout
    finally:
        server.kill()
        socket_file(socket).unlink(missing_ok=True)


def test_doctor_reads_a_verl_run(tmp_path):
    """doctor finds a run of any framework the way `check` does, with its adapter's checkpoints and launch script."""
    run = tmp_path / "verl-run"
    shutil.copytree(ROOT / "evals" / "fixtures" / "95_verl-actor-died-resumed" / "run", run)
    done = rlagent("doctor", str(run), "--tmux-socket", f"rlagent-doctor-none-{os.getpid()}", "--llm", "off",
                   "--home", str(tmp_path / "home"))  # fmt: skip
    assert "Traceback" not in done.stderr and "not a prime-rl run" not in done.stderr
    assert f"{run.resolve()} (verl)" in done.stdout
    assert "newest complete at step 40" in done.stdout
    assert "`bash run_grpo.sh` from run_grpo.sh in the run dir" in done.stdout
    assert done.returncode == 1 and "missing: tmux" in done.stdout  # no tmux server on that socket
