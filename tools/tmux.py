"""The run's tmux `Launcher` pane (libtmux 0.62, new API): find it, tell if it is busy, type into it.

This is the only way rlagent acts on a run (DESIGN.md rule 1): keys typed into the pane where
the researcher launched the run and sees what happens. Nothing here decides whether to send.
`PaneLike` is the small interface the launcher node and the launch-command search use, and
`PaneOpener` how they reach it (`open_launcher` here; tests pass a fake, tests/fakes.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # libtmux loads only when a pane is opened: every check-in imports this module
    from libtmux.pane import Pane

from rlagent.models.actions import TmuxTarget
from rlagent.tools.untrusted import strip_controls

SHELLS = frozenset({"bash", "zsh", "sh", "dash", "fish", "ksh", "mksh", "tcsh", "csh", "nu", "xonsh"})
HISTORY_LINES = 2000


class TmuxError(Exception):
    """The tmux server, session or window is missing or unreachable; one clear line."""


class PaneLike(Protocol):
    def busy_with(self) -> str | None: ...
    def send_line(self, text: str) -> None: ...
    def send_key(self, key: str) -> None: ...
    def lines(self, history: int = HISTORY_LINES) -> list[str]: ...


class PaneOpener(Protocol):
    def __call__(self, target: TmuxTarget) -> PaneLike:
        """The target's pane; TmuxError saying what is missing (server, session, window)."""
        ...


def socket_file(socket: str) -> Path:
    """Where `tmux -L NAME` keeps its socket (tmux leaves the file behind after kill-server)."""
    return Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / socket


def _where(target: TmuxTarget) -> str:
    return f"tmux socket {target.socket!r} (tmux -L {target.socket})" if target.socket else "the default tmux server"


class LauncherPane:
    """The active pane of `SESSION:WINDOW` on one tmux server."""

    def __init__(self, pane: Pane, target: TmuxTarget) -> None:
        self.pane = pane
        self.target = target

    def busy_with(self) -> str | None:
        """The pane's foreground command when it is not a shell prompt (a run is in it), else None."""
        from libtmux import exc as tmux_exc

        try:
            self.pane.refresh()
        except tmux_exc.LibTmuxException as exc:
            raise TmuxError(f"{self.target.describe()}: {exc}") from exc
        command = (self.pane.pane_current_command or "").lstrip("-")
        return None if command in SHELLS else (command or "unknown")

    def send_line(self, text: str) -> None:
        """Type `text` literally (no key-name interpretation, no history suppression), then Enter."""
        self.pane.send_keys(text, enter=True, literal=True, suppress_history=False)

    def send_key(self, key: str) -> None:
        """A tmux key name such as `C-c`."""
        self.pane.send_keys(key, enter=False)

    def lines(self, history: int = HISTORY_LINES) -> list[str]:
        """Visible lines plus history, wrapped lines joined (a long command is one line); the
        pane shows program output, so control characters are stripped (tools.untrusted)."""
        return [strip_controls(line) for line in self.pane.capture_pane(start=-history, end="-", join_wrapped=True) or []]


def open_launcher(target: TmuxTarget) -> LauncherPane:
    """The Launcher pane; a missing server, session or window is a TmuxError saying which."""
    import libtmux
    from libtmux import exc as tmux_exc

    try:
        server = libtmux.Server(socket_name=target.socket)
        if not server.is_alive():
            where = f"on socket {target.socket!r} (tmux -L {target.socket})" if target.socket else "(the default socket)"
            raise TmuxError(
                f"no tmux server is running {where}: is the run's tmux session up? (--tmux-socket NAME for tmux -L NAME)"
            )
        session = server.sessions.get(session_name=target.session, default=None)
        if session is None:
            names = ", ".join(s.session_name or "?" for s in server.sessions) or "none"
            raise TmuxError(f"no tmux session {target.session!r} on {_where(target)} (sessions: {names}); pass --session")
        window = session.windows.get(window_name=target.window, default=None)
        if window is None:
            names = ", ".join(w.window_name or "?" for w in session.windows) or "none"
            raise TmuxError(f"no window {target.window!r} in tmux session {target.session!r} (windows: {names})")
        pane = window.active_pane
    except tmux_exc.LibTmuxException as exc:
        raise TmuxError(f"tmux on {_where(target)}: {exc}") from exc
    if pane is None:
        raise TmuxError(f"window {target.window!r} of tmux session {target.session!r} has no active pane")
    return LauncherPane(pane, target)
