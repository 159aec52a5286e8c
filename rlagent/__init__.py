"""rlagent: watches prime-rl RL training runs."""

import os as _os
import signal as _signal
import sys as _sys

if (  # the `rlagent` program starting (not a library user): Ctrl-C before its main() ends it quietly
    _sys.argv
    and _os.path.basename(_sys.argv[0] or "") == "rlagent"
    and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler
):

    def _stop_while_starting(signum, frame):  # pragma: no cover - timing dependent
        _os.write(2, b"rlagent: stopped (Ctrl-C)\n")
        _os._exit(130)

    _signal.signal(_signal.SIGINT, _stop_while_starting)

from loguru import logger

# A library stays quiet unless its application asks: the CLI enables these logs.
logger.disable("rlagent")
