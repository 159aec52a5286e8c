"""A Ctrl-C is never lost.

Python's SIGINT handler raises KeyboardInterrupt in whatever the main thread runs at that moment,
and not every place lets it through: in a weakref callback or a `__del__` Python prints "Exception
ignored in ..." with a traceback and drops it; a C extension that calls back into Python may turn
it into its own error (ormsgpack decoding a checkpoint: `ValueError: ext_hook failed`). Measured on
`rlagent run` Ctrl-C'd 0.45-0.8 s after it started, during its first check-in: of 200, two went on
to sleep until their next check-in and one ended with that ValueError's traceback.

So the program's handler (`on_ctrl_c`, installed by `rlagent.commands.errors.run_guarded`) notes
the Ctrl-C before it raises; everything that waits in the normal course of a command (`sleep`, the
approval prompt) and the command's end call `raise_if_ctrl_c`, and an error while a Ctrl-C is
noted is reported as the Ctrl-C it came from. Waits of a cleanup after a Ctrl-C use `time.sleep`.
"""

from __future__ import annotations

import signal
import sys
import threading
import time

_pressed = False
_python_hook = sys.unraisablehook


def on_ctrl_c(signum, frame) -> None:
    """SIGINT's handler: Python's own (KeyboardInterrupt), after noting the Ctrl-C."""
    global _pressed
    _pressed = True
    raise KeyboardInterrupt


def _drop_quietly(unraisable) -> None:
    # A KeyboardInterrupt Python could not raise: noted by on_ctrl_c, and no traceback on the terminal.
    if unraisable.exc_type is None or not issubclass(unraisable.exc_type, KeyboardInterrupt):
        _python_hook(unraisable)


def catch_ctrl_c() -> None:
    """Install `on_ctrl_c` for SIGINT (unless SIGINT is ignored, as in `rlagent watch ... &` from a script)."""
    global _python_hook
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return
    signal.signal(signal.SIGINT, on_ctrl_c)
    if sys.unraisablehook is not _drop_quietly:
        _python_hook, sys.unraisablehook = sys.unraisablehook, _drop_quietly


def ctrl_c_pressed() -> bool:
    return _pressed


def raise_if_ctrl_c() -> None:
    """Raise KeyboardInterrupt if Ctrl-C was pressed: the program should not be here, but stopping.
    In the main thread only, where Python raises it: `watch`'s workers finish their check-ins."""
    if _pressed and threading.current_thread() is threading.main_thread():
        raise KeyboardInterrupt


def sleep(seconds: float) -> None:
    """`time.sleep` that a Ctrl-C pressed earlier, and dropped on its way, stops rather than sleeps through."""
    raise_if_ctrl_c()
    time.sleep(seconds)
