"""Ctrl-C: one Python drops on its way still stops the program (tools/interrupts.py), and one in the
middle of a check-in's checkpoint write neither crashes rlagent nor loses the check-in.

Each case is a real process running the program's top-level handler (`run_guarded`) around a
command that gets a real SIGINT where Python cannot raise it: in a weakref callback (Python prints
"Exception ignored" and goes on), in ormsgpack's ext_hook (the checkpoint decoder turns it into
`ValueError: ext_hook failed`), or under a library's `except BaseException`. What follows is what
the commands do next: sleep until the next check-in, ask for approval, or end.
"""

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rlagent.graph.runner import Monitor
from rlagent.tools.layout import discover_run

from runbuilder import HRun

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


def test_a_dropped_ctrl_c_stops_the_main_thread_not_a_worker_finishing_its_check_in():
    worker = """
        import threading
        finished = []
        worker = threading.Thread(target=lambda: (SystemClock().sleep(0.1), finished.append(True)))
        worker.start()
        worker.join()
        print("worker finished" if finished else "worker stopped")
    """
    done, _ = run_program(program(DROPPED_IN["a weakref callback"] + worker, THEN["sleeps until the next check-in"]))
    assert (done.returncode, done.stdout, done.stderr) == (130, "worker finished\n", "rlagent: stopped (Ctrl-C)\n")


def test_an_error_a_ctrl_c_caused_in_a_c_extension_is_the_ctrl_c_not_a_traceback():
    decode = """
        import ormsgpack
        def hook(code, data):
            signal.raise_signal(signal.SIGINT)
        ormsgpack.unpackb(ormsgpack.packb(ormsgpack.Ext(5, b"x")), ext_hook=hook)
    """
    done, _ = run_program(program(decode, "pass"))
    assert (done.returncode, done.stderr) == (130, "rlagent: stopped (Ctrl-C)\n"), done.stderr


def test_a_command_that_catches_the_ctrl_c_keeps_the_status_it_chose():
    caught = """
        import sys
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            print("stopping the children")
            sys.exit(1)  # what the simulated launcher does, as prime-rl's
    """
    done, _ = run_program(program(caught, "pass"))
    assert (done.returncode, done.stdout, done.stderr) == (1, "stopping the children\n", "")


def test_an_error_without_a_ctrl_c_keeps_its_traceback():
    done, _ = run_program(program("raise ValueError('a bug')", "pass"))
    assert done.returncode == 1 and "Traceback" in done.stderr and "ValueError: a bug" in done.stderr


CTRL_C_WHILE_THE_CHECKPOINT_IS_WRITTEN = """
import os, signal, sqlite3, sys, threading
from pathlib import Path
from rlagent.graph.runner import Monitor
from rlagent.tools.layout import discover_run

signal.signal(signal.SIGINT, signal.default_int_handler)
monitor = Monitor(discover_run(Path(sys.argv[1])), home=Path(sys.argv[2]), offline=True)
monitor.check_in()
other = sqlite3.connect(monitor.dir / "state.db", isolation_level=None, check_same_thread=False)
other.execute("BEGIN IMMEDIATE")  # the next check-in's checkpoint write waits for it in SQLite (busy timeout)
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()  # Ctrl-C while it waits
threading.Timer(1.5, other.rollback).start()
try:
    monitor.check_in()
except KeyboardInterrupt:
    monitor.close()  # as `rlagent run` does after a Ctrl-C: LangGraph's worker thread is still writing
    print("stopped")
"""


def test_a_ctrl_c_while_the_checkpoint_is_written_neither_crashes_nor_loses_the_check_in(tmp_path):
    run = HRun(tmp_path)
    run.steps(20)
    home = tmp_path / "home"
    script = [sys.executable, "-c", CTRL_C_WHILE_THE_CHECKPOINT_IS_WRITTEN, str(run.dir), str(home)]
    done = subprocess.run(script, capture_output=True, text=True, timeout=60)
    # closing the connection under the running write was a SIGSEGV
    assert (done.returncode, done.stdout) == (0, "stopped\n"), done.stderr[-2000:]
    after = Monitor(discover_run(run.dir), home=home, offline=True)
    try:
        assert after.check_in().checkin == 3  # the interrupted check-in #2 was stored; this is the next
    finally:
        after.close()


def _waiting_to_read_stdin(pid: int) -> bool:
    """The process sits in read(0, ...): /proc/PID/syscall begins with the call's number (read is 0
    on x86-64, 63 on arm64) and its first argument, the fd."""
    try:
        with open(f"/proc/{pid}/syscall") as f:
            call = f.read().split()
    except OSError:
        return False
    return call[:2] in (["0", "0x0"], ["63", "0x0"])


def test_a_ctrl_c_that_stops_a_command_is_said_as_every_ctrl_c_is():
    """typer ends a command that a Ctrl-C stops with status 130 and says nothing; the program says
    it. `rlagent diagnose -` waits for its input (a pipe nobody writes to) when the Ctrl-C comes."""
    waiting = subprocess.Popen(
        [sys.executable, "-m", "rlagent", "diagnose", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as in a terminal
    )
    try:
        deadline = time.monotonic() + 60
        while not _waiting_to_read_stdin(waiting.pid) and waiting.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _waiting_to_read_stdin(waiting.pid), "never waited for its input"
        waiting.send_signal(signal.SIGINT)
        out, err = waiting.communicate(timeout=30)
    finally:
        waiting.kill()
    assert (waiting.returncode, out, err) == (130, "", "rlagent: stopped (Ctrl-C)\n")
