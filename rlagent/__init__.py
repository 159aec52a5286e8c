"""rlagent: watches prime-rl RL training runs."""

import gc as _gc
import os as _os
import signal as _signal
import sys as _sys

_gc_held = False

if (  # the `rlagent` program starting (not a library user): Ctrl-C before its main() ends it quietly
    _sys.argv
    and _os.path.basename(_sys.argv[0] or "") == "rlagent"
    and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler
):

    def _stop_while_starting(signum, frame):  # pragma: no cover - timing dependent
        _os.write(2, b"rlagent: stopped (Ctrl-C)\n")
        _os._exit(130)

    _signal.signal(_signal.SIGINT, _stop_while_starting)
    # Importing the commands builds about a million objects that all live until exit: the cyclic
    # collections they trigger find nothing and cost 0.15-0.2 s of every command's start.
    _gc.disable()
    _gc_held = True


from loguru import logger  # noqa: E402  (after the Ctrl-C handler and the held collections)

# A library stays quiet unless its application asks: the CLI enables these logs.
logger.disable("rlagent")


def end_startup() -> None:
    """The program's imports are done: collections on again, with what the imports built frozen
    (never scanned again), so a long `rlagent run` does not walk the modules every full collection."""
    global _gc_held
    if _gc_held:
        _gc_held = False
        _gc.freeze()
        _gc.enable()
