"""rlagent: watches prime-rl RL training runs."""

import gc as _gc
import importlib as _importlib
import itertools as _itertools
import os as _os
import signal as _signal
import sys as _sys

_gc_held = False
_program = False
"""Started as the `rlagent` program (not imported by a library user or a test)."""


def hold_collector() -> None:
    """Cyclic collections off until `end_startup`: importing the commands builds about a million
    objects that all live until exit, and the collections they trigger find nothing and cost
    0.15-0.2 s of every command's start. Called below when the program starts."""
    global _gc_held, _program
    _gc.disable()
    _gc_held = _program = True


def _stop_while_starting(signum, frame):  # pragma: no cover - timing dependent
    _os.write(2, b"rlagent: stopped (Ctrl-C)\n")
    _os._exit(130)


def quiet_startup_interrupt() -> None:
    """A Ctrl-C while the program starts (its imports take a second or more) ends it with the line
    and status of any other Ctrl-C, not a traceback; `main` puts Python's own handler back. Called
    below when the program starts. Started with Ctrl-C ignored, as `rlagent watch ... &` in a
    script is, it stays ignored."""
    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _stop_while_starting)


def _starting_as_program() -> bool:
    """The `rlagent` script, or `python -m rlagent` (argv[0] is "-m" while the package is imported,
    for any module run with -m: the interpreter's own arguments tell which), not a library user."""
    name = _os.path.basename(_sys.argv[0] or "") if _sys.argv else ""
    if name != "-m":
        return name == "rlagent"
    args = getattr(_sys, "orig_argv", [])
    return "-mrlagent" in args or any(pair == ("-m", "rlagent") for pair in _itertools.pairwise(args))


if _starting_as_program():
    quiet_startup_interrupt()
    hold_collector()


from loguru import logger  # noqa: E402  (after the Ctrl-C handler and the held collections)

# A library stays quiet unless its application asks: the CLI enables these logs.
logger.disable("rlagent")


YOUNG_COLLECTION_THRESHOLD = 20_000
"""Net allocations between two young collections (Python's default: 700)."""


def end_startup() -> None:
    """The program's imports are done: collections on again, tuned for check-ins (`settle_collector`)."""
    global _gc_held
    if _gc_held:
        _gc_held = False
        settle_collector()


def import_late(name: str) -> None:
    """Import a heavy part of the program that a command learns it needs only once it runs (the graph,
    for `status` of one run rather than of a folder of runs) as the startup's imports are made: with
    cyclic collections held, then what it built frozen. A plain import outside the program."""
    if name in _sys.modules or not _program or _gc_held:
        _importlib.import_module(name)
        return
    _gc.disable()
    try:
        _importlib.import_module(name)
    finally:
        _gc.freeze()
        _gc.enable()


def settle_collector() -> None:
    """What the program imported is frozen (never scanned again, so a long `rlagent run` does not
    walk the modules at every full collection), and young collections come every 20,000 net
    allocations instead of 700: a warm check-in makes ~30,000 short-lived objects that reference
    counting frees, which at 700 cost ~40 young collections and every few check-ins a full one,
    4 ms of a 30 ms warm check-in (bench/bench_graph_floor.py). Only cycles wait longer: a few MB."""
    _gc.freeze()
    _gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *_gc.get_threshold()[1:])
    _gc.enable()
