"""A Ctrl-C that Python drops on its way still stops the program (tools/interrupts.py).

Each case is a real process running the program's top-level handler (`run_guarded`) around a
command that gets a real SIGINT where Python cannot raise it: in a weakref callback (Python prints
"Exception ignored" and goes on), in ormsgpack's ext_hook (the checkpoint decoder turns it into
`ValueError: ext_hook failed`), or under a library's `except BaseException`. What follows is what
the commands do next: sleep until the next check-in, ask for approval, or end.
"""

import subprocess
import sys
import textwrap
import time

import pytest

DROPPED_IN = {
    "a weakref callback": """
        import weakref
        class Thing: pass
        thing = Thing()
        ref = weakref.ref(thing, lambda _: signal.raise_signal(signal.SIGINT))
        del thing
    """,
    "a library's except BaseException": """
        try:
            signal.raise_signal(signal.SIGINT)
        except BaseException:
            pass
    """,
}
THEN = {
    "sleeps until the next check-in": "SystemClock().sleep(60)",
    "asks for approval": "print(ask('Send?', timeout_s=60))",
    "ends": "pass",
}


def program(dropped: str, then: str) -> str:
    return textwrap.dedent(
        """
        import signal
        from rlagent.commands.errors import run_guarded
        from rlagent.tools.approval import ask
        from rlagent.tools.clock import SystemClock

        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, whatever pytest's was

        def command():
        {dropped}
            {then}
            print("went on")

        run_guarded(command)
        """
    ).format(dropped=textwrap.indent(textwrap.dedent(dropped).strip(), "    "), then=then)


def run_program(source: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    # stdin a pipe nobody writes to: the prompt would wait for its whole timeout
    done = subprocess.run([sys.executable, "-c", source], stdin=subprocess.PIPE, capture_output=True, text=True, timeout=50)
    return done, time.monotonic() - started


@pytest.mark.parametrize("then", THEN)
@pytest.mark.parametrize("dropped", DROPPED_IN)
def test_a_ctrl_c_dropped_on_its_way_stops_the_program_quietly(dropped, then):
    done, took = run_program(program(DROPPED_IN[dropped], THEN[then]))
    assert (done.returncode, done.stderr) == (130, "rlagent: stopped (Ctrl-C)\n"), done.stderr
    assert ("went on" in done.stdout) == (then == "ends") and took < 30  # no wait sat out


def test_an_error_a_ctrl_c_caused_in_a_c_extension_is_the_ctrl_c_not_a_traceback():
    decode = """
        import ormsgpack
        def hook(code, data):
            signal.raise_signal(signal.SIGINT)
        ormsgpack.unpackb(ormsgpack.packb(ormsgpack.Ext(5, b"x")), ext_hook=hook)
    """
    done, _ = run_program(program(decode, "pass"))
    assert (done.returncode, done.stderr) == (130, "rlagent: stopped (Ctrl-C)\n"), done.stderr


def test_an_error_without_a_ctrl_c_keeps_its_traceback():
    done, _ = run_program(program("raise ValueError('a bug')", "pass"))
    assert done.returncode == 1 and "Traceback" in done.stderr and "ValueError: a bug" in done.stderr
