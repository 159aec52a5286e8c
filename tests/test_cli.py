"""The CLI as a user calls it: a real process, its stdout, stderr and exit status."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from runbuilder import HRun

RLAGENT = [sys.executable, "-m", "rlagent"]


def rlagent(*args, env=None, timeout=60):
    return subprocess.run([*RLAGENT, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_help_is_complete():
    top = rlagent("--help")
    assert top.returncode == 0 and "check" in top.stdout and "run" in top.stdout
    check = rlagent("check", "--help")
    for flag in ("--offline", "--json", "--no-write", "--config", "--home"):
        assert flag in check.stdout
    assert "--cadence" in rlagent("run", "--help").stdout and "--max-checks" in rlagent("run", "--help").stdout


def test_user_errors_are_one_line_and_exit_2(tmp_path):
    missing = rlagent("check", str(tmp_path / "nope"))
    assert missing.returncode == 2 and missing.stderr.strip().count("\n") == 0
    assert "no such directory" in missing.stderr and "Traceback" not in missing.stderr
    (tmp_path / "empty").mkdir()
    assert "not a prime-rl run" in rlagent("check", str(tmp_path / "empty")).stderr
    run = HRun(tmp_path)
    bad = rlagent("run", str(run.dir), "--cadence", "soon")
    assert bad.returncode == 2 and "bad cadence" in bad.stderr and "Traceback" not in bad.stderr
    huge = rlagent("run", str(run.dir), "--cadence", "99999999999h")  # overflowed the clock: a traceback
    assert huge.returncode == 2 and "at most a year" in huge.stderr and huge.stderr.strip().count("\n") == 0
    conf = tmp_path / "bad.toml"
    conf.write_text("[thresholds\n")
    assert "malformed TOML" in rlagent("check", str(run.dir), "--config", str(conf)).stderr


def test_a_config_that_is_not_a_settings_file_is_refused_at_once(tmp_path):
    """A FIFO as --config waited for a writer for ever, and /dev/zero was read until memory ran out."""
    run = HRun(tmp_path)
    fifo = tmp_path / "settings.toml"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.toml"
    huge.write_text("#" * (2 << 20))
    for config, why in [(fifo, "a FIFO, not read"), ("/dev/zero", "a character device, not read"), (huge, "larger than 1 MB")]:
        result = rlagent("check", str(run.dir), "--config", str(config), timeout=30)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert f"config {config}: cannot read it ({why}" in result.stderr


def test_check_json_prints_only_the_report(tmp_path):
    run = HRun(tmp_path)
    run.steps(12)
    done = rlagent("check", str(run.dir), "--offline", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report) >= {
        "run_dir",
        "layout",
        "checked_at",
        "step",
        "max_steps",
        "health",
        "findings",
        "proposal",
        "status_entry",
    }
    assert (report["layout"], report["step"], report["max_steps"], report["health"]) == ("H", 12, 100, "Healthy")
    assert report["checked_at"] == "2026-11-20T09:08:00Z"
    assert report["status_entry"].startswith("## 2026-11-20 09:08 UTC\n**Step**: 12 / 100  \n**Health**: Healthy  \n")
    assert run.status().count("<!-- rlagent:checkin") == 2


def test_check_on_an_output_dir_picks_the_newest_run(tmp_path):
    old = HRun(tmp_path, "older")
    old.steps(3)
    new = HRun(tmp_path, "newer")
    new.clock = old.clock.replace(hour=20)
    new.steps(4)
    done = rlagent("check", str(tmp_path), "--offline", "--no-write")
    assert done.returncode == 0, done.stderr
    assert "newest run in" in done.stdout and "newer" in done.stdout and not new.status()


def test_run_with_max_checks(tmp_path):
    run = HRun(tmp_path)
    run.steps(5)
    done = rlagent("run", str(run.dir), "--offline", "--cadence", "1s", "--max-checks", "2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("check-in #") == 2 and "Healthy" in done.stdout


def test_ctrl_c_stops_cleanly_without_a_traceback_or_half_entry(tmp_path):
    run = HRun(tmp_path)
    run.steps(8)
    proc = subprocess.Popen(
        [*RLAGENT, "run", str(run.dir), "--offline", "--cadence", "1h"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 30
    while "check-in #1" not in run.status() and "#1 -->" not in run.status() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "Traceback" not in err and "stopped (Ctrl-C)" in out
    text = run.status()
    assert text.count("## 2026-11-20") == 1 and text.rstrip().endswith("#1 -->")


def test_the_program_holds_cyclic_collections_only_while_it_imports(tmp_path):
    """Started as `rlagent`, the package holds the garbage collector off during its imports and
    main() turns it back on (a long `rlagent run` without it would never free a cycle), with young
    collections less often; a library user importing rlagent keeps Python's collector as it was."""
    probe = """
import gc, sys
sys.argv = [sys.argv[1], "--version"]
import rlagent.cli
held = not gc.isenabled()
try:
    rlagent.cli.main()
except SystemExit:
    pass
print(held, gc.isenabled(), gc.get_freeze_count() > 0, gc.get_threshold()[0])
"""
    as_program = subprocess.run([sys.executable, "-c", probe, "/usr/local/bin/rlagent"], capture_output=True, text=True)
    assert as_program.stdout.split()[-4:] == ["True", "True", "True", "20000"], as_program.stderr
    as_library = subprocess.run([sys.executable, "-c", probe, "my_script.py"], capture_output=True, text=True)
    assert as_library.stdout.split()[-4:] == ["False", "True", "False", "700"], as_library.stderr
    # Started with Ctrl-C ignored, as `rlagent watch ... &` in a script is: still the program (it was taken
    # for a library user, with Python's collector settings), and Ctrl-C stays ignored (main() turned it on).
    ignoring = probe.replace("print(held,", "import signal\nprint(signal.getsignal(signal.SIGINT) is signal.SIG_IGN, held,")
    in_background = subprocess.run(
        [sys.executable, "-c", ignoring, "/usr/local/bin/rlagent"],
        capture_output=True,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert in_background.stdout.split()[-5:] == ["True", "True", "True", "True", "20000"], in_background.stderr
    # `python -m rlagent` is the program too (its package is imported while argv[0] is `-m`, and the
    # interpreter's arguments say which module runs), seen from an atexit hook as it ends.
    (tmp_path / "sitecustomize.py").write_text(
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print(gc.isenabled(), gc.get_freeze_count() > 0, gc.get_threshold()[0]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    by_module = subprocess.run([sys.executable, "-m", "rlagent", "--version"], capture_output=True, text=True, env=env)
    assert by_module.stdout.split()[-3:] == ["True", "True", "20000"], by_module.stderr
    # and a module run with -m that is not rlagent's, importing rlagent as it is found, is a library user
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "__init__.py").write_text("import rlagent\n")
    (tmp_path / "other" / "__main__.py").write_text("")
    by_other = subprocess.run([sys.executable, "-m", "other"], capture_output=True, text=True, env=env)
    assert by_other.stdout.split()[-3:] == ["True", "False", "700"], by_other.stderr


def test_a_check_imports_the_graph_stack_while_collections_are_held(tmp_path):
    """`rlagent check` imports LangGraph and the agents before main() turns the collector back on:
    not one cyclic collection runs from main()'s start to the end of the graph stack's import (they
    cost 0.2 s of each check); `status` of one run imports it as late, held the same way. `--help`
    and the commands that need no monitor do not import it."""
    run = HRun(tmp_path)
    probe = """
import gc, sys
sys.argv = ["/usr/local/bin/rlagent", *sys.argv[1:]]
collected = []

def seen(phase, info):
    cli, runner = sys.modules.get("rlagent.cli"), sys.modules.get("rlagent.graph.runner")
    if phase == "start" and hasattr(cli, "main") and not hasattr(runner, "Monitor"):
        collected.append(info["generation"])

gc.callbacks.append(seen)
import rlagent.cli
try:
    rlagent.cli.main()
except SystemExit:
    pass
print("COLLECTED", len(collected), "GRAPH", "rlagent.graph.runner" in sys.modules, file=sys.stderr)
"""

    def probed(*args):
        done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120)
        return done.stderr.strip().splitlines()[-1]

    home = str(tmp_path / "home")
    assert probed("check", str(run.dir), "--offline", "--json", "--home", home) == "COLLECTED 0 GRAPH True"
    assert probed("check", "--help") == "COLLECTED 0 GRAPH False"
    assert probed("status", str(tmp_path), "--home", home).endswith("GRAPH False")  # a directory of runs: a table
    assert probed("status", str(run.dir), "--home", home) == "COLLECTED 0 GRAPH True"  # one run: its monitor


def test_a_framework_forced_against_the_run_files_is_obeyed_and_said(tmp_path):
    """A verl run read as TRL checks in Healthy with no step; the person is told what its files show."""
    import shutil
    from pathlib import Path

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[1] / "evals" / "fixtures" / "87_verl-entropy-collapse" / "run", run)
    home = str(tmp_path / "home")
    forced = rlagent("check", str(run), "--framework", "trl", "--offline", "--json", "--home", home)
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["framework"] == "trl"
    assert f"rlagent: note: {run} looks like a verl run; read as trl, as --framework asks" in forced.stderr
    agreed = rlagent("check", str(run), "--framework", "verl", "--offline", "--json", "--home", home)
    assert agreed.returncode == 0 and "looks like" not in agreed.stderr
    assert json.loads(agreed.stdout)["health"] == "Degraded"


def test_a_reader_of_stdout_that_went_away_ends_rlagent_as_sigpipe_would(tmp_path):
    """`rlagent check RUN | head -1`: the check-in is made (STATUS.md appended), then its output meets
    a closed pipe. That is 141 (128 + SIGPIPE) with nothing on stderr, as for a program the signal
    ended, and not 1, which says the check-in failed."""
    run = HRun(tmp_path)
    home = str(tmp_path / "home")
    verl_log = Path(__file__).resolve().parents[1] / "evals" / "fixtures" / "87_verl-entropy-collapse" / "run" / "verl_demo.log"
    for args in (["check", str(run.dir), "--offline", "--home", home], ["diagnose", str(verl_log)]):
        read_end, write_end = os.pipe()
        os.close(read_end)  # gone before rlagent writes a byte: its first write meets EPIPE
        try:
            done = subprocess.run([*RLAGENT, *args], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
        finally:
            os.close(write_end)
        assert (done.returncode, done.stderr) == (141, ""), args
    assert "**Health**" in (run.dir / "STATUS.md").read_text()


def test_a_usage_error_is_one_line_that_says_where_the_help_is():
    """A missing argument, an unknown command or option, a bad value: one `rlagent: error:` line and
    exit 2, as every other failure, not typer's framed panel; what was typed reaches the terminal
    without its control sequences."""
    cases = [
        (["status"], "Missing argument 'run_dir'. (see 'python -m rlagent status --help')"),  # as it was called
        (["chek"], "No such command 'chek'. Did you mean 'check'? (see 'python -m rlagent --help')"),
        (["check", "somewhere", "--nope"], "No such option: --nope"),
        (["watch", "somewhere", "--max-rounds", "0"], "Invalid value for '--max-rounds'"),
        (["\x1b]2;owned\x07"], "No such command"),
    ]
    for args, said in cases:
        done = rlagent(*args)
        assert done.returncode == 2 and done.stdout == "", args
        assert done.stderr.startswith("rlagent: error: ") and done.stderr.count("\n") == 1, done.stderr
        assert said in done.stderr and "\x1b" not in done.stderr and "\x07" not in done.stderr, done.stderr
    bare = rlagent()  # no arguments at all is no error: the help
    assert bare.returncode == 0 and "Usage: python -m rlagent [OPTIONS] COMMAND" in bare.stdout and bare.stderr == ""
