"""The one top-level error handler of the `rlagent` command: every expected failure becomes one
`rlagent: error:` line on stderr and a non-zero exit status, never a traceback.

A Ctrl-C while the program is still starting is rlagent.quiet_startup_interrupt's.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable
from typing import NoReturn

INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT), as shells report it."""
BROKEN_PIPE = 141
"""Exit status when the reader of stdout went away (`rlagent check RUN | head -1`): 128 + SIGPIPE, as
shells report a program the signal ended, and not 1, which says the check-in failed."""


def describe(exc: BaseException) -> tuple[str, int] | None:
    """(one line, exit status) for an expected failure; None for a bug (which keeps its traceback)."""
    name = type(exc).__name__
    if name == "TmuxCommandNotFound":  # libtmux: no tmux binary
        return "tmux is not installed (Debian/Ubuntu: sudo apt-get install tmux; macOS: brew install tmux)", 1
    if name in ("StoreError", "RunLocked"):  # the state store (graph/store.py): full, unreadable or locked
        return str(exc), 2
    if name in ("TmuxError", "ConfigError", "FixturesNotFound", "FixtureError"):
        return str(exc), 1 if name == "TmuxError" else 2
    if isinstance(exc, OSError):
        what = exc.strerror or str(exc) or name
        where = f"{exc.filename}: " if exc.filename else ""
        if exc.filename2:
            where = f"{exc.filename} -> {exc.filename2}: "
        return f"{where}{what}", 1
    return None


def _stopped() -> NoReturn:
    sys.stderr.write("rlagent: stopped (Ctrl-C)\n")
    sys.exit(INTERRUPTED)


def _ended_by_typer_for_ctrl_c(done: SystemExit) -> bool:
    """typer ends a command that a KeyboardInterrupt stops with `raise Exit(130) from` it, then
    `sys.exit(130)`, printing nothing."""
    ended = done.__context__
    return ended is not None and isinstance(ended.__cause__, KeyboardInterrupt)


def _ended_for_a_closed_pipe(done: SystemExit) -> bool:
    """typer (for any EPIPE in a command) and rich (for its console's) end the command with a silent
    `exit(1)` raised while handling the error: the output's reader went away."""
    ended = done.__context__
    return done.code == 1 and isinstance(ended, OSError) and ended.errno == errno.EPIPE


def run_guarded(app: Callable[[], object]) -> None:
    """Run the typer app; an expected failure is one `rlagent: error:` line, Ctrl-C exit 130."""
    from rlagent.tools import interrupts

    interrupts.catch_ctrl_c()
    try:
        app()
        interrupts.raise_if_ctrl_c()  # ended without noticing a Ctrl-C dropped on its way (tools/interrupts.py)
    except SystemExit as done:
        # A Ctrl-C typer ended the command for (saying nothing) is the Ctrl-C, and so is a success
        # after one (dropped on its way); a command that caught it chose its own status (the
        # simulated launcher's 1, as prime-rl's launcher; `run`'s 130 after its own line), which stands.
        if _ended_by_typer_for_ctrl_c(done) or (done.code in (0, None) and interrupts.ctrl_c_pressed()):
            _stopped()
        if _ended_for_a_closed_pipe(done):  # what is left buffered is already bound for nowhere (typer, rich)
            sys.exit(BROKEN_PIPE)
        raise
    except KeyboardInterrupt:
        _stopped()
    except Exception as exc:
        if interrupts.ctrl_c_pressed():  # an error the Ctrl-C caused in a C extension (ormsgpack: 'ext_hook failed')
            _stopped()
        known = describe(exc)
        if known is None:
            raise
        message, status = known
        from rlagent.tools.untrusted import one_line  # a path or a config value: no control sequence reaches the terminal

        sys.stderr.write(f"rlagent: error: {one_line(message)}\n")
        sys.exit(status)
