"""What the launcher node is given. Every side effect is an interface with a real default here
and a fake in tests: the clock (and sleeping), the STATUS.md sink, the process probe, the pane."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rlagent.tools.clock import Clock, SystemClock
from rlagent.tools.processes import ProcessProbe, SystemProcesses
from rlagent.tools.slurm_probe import ClusterProbe, SystemCluster
from rlagent.tools.statusfile import StatusFile, StatusSink
from rlagent.tools.tmux import PaneOpener, open_launcher


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class LauncherDeps:
    journal_dir: Path
    """Where the write-ahead dispatch records live (the run's state dir)."""
    run_key: str
    clock: Clock = field(default_factory=SystemClock)
    """Stamps the decision's outcome and the send; paces the verification."""
    verify_timeout_s: float = 600.0
    verify_poll_s: float = 2.0
    required_roles: tuple[str, ...] = ("Trainer", "Orchestrator")
    write: bool = True
    notify: Callable[[str], None] = field(default=_quiet)
    """Progress lines for the person who approved (sent, verifying, verified)."""
    open_pane: PaneOpener = open_launcher
    """How the Launcher pane is reached (tools.tmux)."""
    processes: ProcessProbe = field(default_factory=SystemProcesses)
    """Whether the run's processes are back (restart) or gone (stop)."""
    cluster: ClusterProbe = field(default_factory=SystemCluster)
    """The run's SLURM jobs: a resubmission is verified by a new job RUNNING, a scancel by the job ending."""
    status: StatusSink = field(default_factory=StatusFile)
    """Where the follow-up entry is appended (the run's STATUS.md)."""
