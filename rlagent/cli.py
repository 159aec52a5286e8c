"""Command line: the `rlagent` app and its commands, registered here and nothing else.

Each command lives in rlagent/commands/ (one module each; what they share in
rlagent.commands.common and rlagent.commands.offer). Heavy libraries (LangGraph, the SQLite
checkpointer) load inside the commands that need them, so `--help` and errors are instant. User
errors are one line on stderr and exit status 2.
"""

from __future__ import annotations

import sys

import typer

from rlagent.commands.approve import approve
from rlagent.commands.check import check
from rlagent.commands.common import err
from rlagent.commands.demo import demo
from rlagent.commands.diagnose import diagnose
from rlagent.commands.evaluate import evaluate
from rlagent.commands.replay import replay
from rlagent.commands.run import run
from rlagent.commands.simulate import simulate
from rlagent.commands.status import status
from rlagent.graph.store import RunLocked, StoreError

app = typer.Typer(
    help="rlagent watches an RL training run of prime-rl, verl, TRL or OpenRLHF: it reads configs, logs, metrics and rollouts, "
    "diagnoses what is wrong, and appends a dated entry to the run's STATUS.md.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.command(name="check")(check)
app.command(name="run")(run)
app.command(name="replay")(replay)
app.command(name="eval")(evaluate)
app.command(name="diagnose")(diagnose)
app.command(name="approve")(approve)
app.command(name="status")(status)
app.command(name="demo")(demo)
app.command(name="simulate")(simulate)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("stopped (Ctrl-C)")
        sys.exit(130)
    except (StoreError, RunLocked) as exc:  # from any command: one line, never a traceback
        err.print(f"rlagent: error: {exc}", markup=False)
        sys.exit(2)
