"""Command line: the `rlagent` app and its commands, registered here and nothing else.

Each command lives in rlagent/commands/ (one module each; what they share in
rlagent.commands.common and rlagent.commands.offer). Heavy libraries (LangGraph, the SQLite
checkpointer) load only for the commands that need them (main, below), so `--help` is instant. User
errors are one line on stderr and exit status 2; every other expected failure (a file that
cannot be written, no tmux...) is one `rlagent: error:` line too (rlagent.commands.errors).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Annotated

import typer

from rlagent import end_startup
from rlagent.commands.approve import approve
from rlagent.commands.check import check
from rlagent.commands.demo import demo
from rlagent.commands.diagnose import diagnose
from rlagent.commands.doctor import doctor
from rlagent.commands.errors import run_guarded
from rlagent.commands.evaluate import evaluate
from rlagent.commands.helpfmt import OneLineUsageErrors, show_version
from rlagent.commands.replay import replay
from rlagent.commands.report import report
from rlagent.commands.run import run
from rlagent.commands.silence import ack, silence
from rlagent.commands.simulate import simulate
from rlagent.commands.status import status
from rlagent.commands.watch import watch

app = typer.Typer(
    help="rlagent watches an RL training run of prime-rl, verl, TRL or OpenRLHF: it reads configs, logs, metrics and rollouts, "
    "diagnoses what is wrong, and appends a dated entry to the run's STATUS.md.",
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=OneLineUsageErrors,
)


@app.callback(invoke_without_command=True)
def _top(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", help="Print rlagent's version and exit.", callback=show_version, is_eager=True)
    ] = False,
) -> None:
    """rlagent watches an RL training run of prime-rl, verl, TRL or OpenRLHF: it reads configs, logs,
    metrics and rollouts, diagnoses what is wrong, and appends a dated entry to the run's STATUS.md."""
    if ctx.invoked_subcommand is None:  # bare `rlagent`: the help, and success
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


app.command(name="check")(check)
app.command(name="run")(run)
app.command(name="replay")(replay)
app.command(name="eval")(evaluate)
app.command(name="diagnose")(diagnose)
app.command(name="approve")(approve)
app.command(name="status")(status)
app.command(name="doctor")(doctor)
app.command(name="demo")(demo)
app.command(name="simulate")(simulate)
app.command(name="watch")(watch)
app.command(name="report")(report)
app.command(name="silence")(silence)
app.command(name="ack")(ack)


# The commands that check in, through rlagent.graph.runner: LangGraph, langchain_core and langsmith come
# with it, half a second of imports that build most of the program's long-lived objects. They are
# imported here, before end_startup, while cyclic collections are still held: imported inside the
# command, their collections cost 0.2 s of every `rlagent check`.
GRAPH_COMMANDS = frozenset({"check", "run", "watch", "approve", "demo", "replay", "eval"})


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command in GRAPH_COMMANDS and "--help" not in sys.argv[2:]:
        with contextlib.suppress(ImportError):  # a broken install: the command's own import says so
            import rlagent.graph.runner  # noqa: F401
    end_startup()
    run_guarded(app)
