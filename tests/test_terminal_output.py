"""What reaches a terminal: paths, finding ids, silence reasons and exception messages are printed
as they are (a `[/]` in a path is text, not rich markup) and without any control sequence (DESIGN.md
rule 3). Real processes, as a user runs them, plus the two consoles and the error handler."""

from __future__ import annotations

import errno
import io
import subprocess
import sys

import pytest
from rich.table import Table

from rlagent.commands.console import PlainConsole
from rlagent.commands.errors import run_guarded

from runbuilder import HRun

RLAGENT = [sys.executable, "-m", "rlagent"]
CONTROLS = ("\x1b", "\x07", "\x9b", "\x9d")
TITLE = "\x1b]0;owned\x07"  # sets the terminal's window title
CLEAR = "\x1b[2J"  # clears the screen


def rlagent(*args: str, home) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*RLAGENT, *args, "--home", str(home)], capture_output=True, text=True, timeout=120, errors="surrogateescape"
    )


def no_controls(text: str) -> bool:
    return not any(c in text for c in CONTROLS)


@pytest.mark.parametrize("name", ["run[/]x", "run[bold]x", "exp[seed=1]"])
def test_a_path_with_brackets_is_printed_as_it_is(tmp_path, name):
    """`[/]` ended `rlagent check` with rich's MarkupError and a traceback; `[bold]` vanished."""
    done = rlagent("check", str(tmp_path / name), home=tmp_path / "home")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == f"rlagent: error: {tmp_path / name}: no such directory"


def test_control_sequences_in_a_path_an_id_or_a_reason_never_reach_the_terminal(tmp_path):
    home = tmp_path / "home"
    missing = rlagent("check", str(tmp_path / f"run{TITLE}"), home=home)
    assert missing.returncode == 2 and no_controls(missing.stderr) and "run]0;owned" not in missing.stderr
    assert missing.stderr.count("\n") == 1 and f"{tmp_path}/run" in missing.stderr
    run = HRun(tmp_path)
    run.steps(5)
    assert rlagent("check", str(run.dir), "--offline", "--llm", "off", home=home).returncode == 0
    bad_id = rlagent("silence", str(run.dir), f"nan{CLEAR}", "--for", "1h", "--reason", "x", home=home)
    assert bad_id.returncode == 2 and no_controls(bad_id.stderr) and "unknown finding id" in bad_id.stderr
    reason = f"known{CLEAR} issue{TITLE}"
    silenced = rlagent("silence", str(run.dir), "nan_detected", "--for", "1h", "--reason", reason, home=home)
    assert silenced.returncode == 0, silenced.stderr
    for shown in (rlagent("status", str(run.dir), home=home), rlagent("silence", str(run.dir), "--list", home=home)):
        assert shown.returncode == 0, shown.stderr
        assert "known issue" in shown.stdout and no_controls(shown.stdout), shown.stdout


def test_the_consoles_strip_control_sequences_from_text_and_table_cells():
    sink = io.StringIO()
    console = PlainConsole(file=sink, color_system=None, highlight=False, soft_wrap=True)
    console.print(f"line{TITLE}one", markup=False)
    console.print(f"[bold]marked[/] {CLEAR}two")
    table = Table()
    table.add_column("run")
    table.add_row(f"cell{CLEAR}three")
    console.print(table)
    printed = sink.getvalue()
    assert no_controls(printed)
    assert "lineone" in printed and "marked two" in printed and "cellthree" in printed


def test_an_os_error_naming_a_hostile_file_is_one_clean_line(capsys):
    def app() -> None:
        raise OSError(errno.EACCES, "Permission denied", f"/runs/a{CLEAR}\nb{TITLE}")

    with pytest.raises(SystemExit) as stopped:
        run_guarded(app)
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert err == "rlagent: error: /runs/a b: Permission denied\n"


def test_a_logged_warning_keeps_no_control_sequence(capsys):
    from loguru import logger

    from rlagent.commands.common import setup_logging

    setup_logging(verbose=False)
    try:
        logger.warning("reviewer failed: {}", f"log line {TITLE} quoted")  # an exception's text, say
    finally:
        logger.remove()
        logger.configure(patcher=None)
        logger.disable("rlagent")
    err = capsys.readouterr().err
    assert "WARNING reviewer failed: log line  quoted" in err and no_controls(err)


def test_a_launch_note_quoting_the_pane_is_printed_as_text(capsys):
    """The verification quotes the Launcher pane's last lines; `[/]` there ended the command with a
    MarkupError right after a restart was sent."""
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from rlagent.commands.offer import print_outcome
    from rlagent.models.actions import Decision, LaunchOutcome, LaunchStatus, TmuxTarget

    now = datetime(2026, 11, 27, tzinfo=UTC)
    note = f"not verified: the command exited; the pane's last lines: [/] [bold]x{CLEAR}"
    launch = LaunchOutcome(
        status=LaunchStatus.SENT, decision=Decision(approved=True, by="alice", at=now), note=note, target=TmuxTarget(), at=now
    )
    assert print_outcome(SimpleNamespace(out=SimpleNamespace(launch=launch))) is False
    err = capsys.readouterr().err
    assert "the pane's last lines: [/] [bold]x" in err and no_controls(err)


def test_progress_shows_names_as_text(monkeypatch):
    """A fixture named `a[/]b` broke the progress bar of `eval` and `replay` on a terminal (MarkupError)."""
    from rich.console import Console

    from rlagent.commands import progress

    sink = io.StringIO()
    monkeypatch.setattr(progress, "_console", lambda: Console(file=sink, force_terminal=True, width=100))
    assert list(progress.progress(["a[/]b", "c"], "replaying [/]x", label=str)) == ["a[/]b", "c"]
    with progress.working("checking [/]y"):
        pass
    assert "replaying [/]x" in sink.getvalue() and "checking [/]y" in sink.getvalue()
