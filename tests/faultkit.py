"""Bad input for the fuzzing and full-disk suites: junk bytes, hazards in the file system, files
that vanish or shrink while being read, a bound on how long a check-in may take, a small tmpfs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from hypothesis import strategies as st

# --- Junk -------------------------------------------------------------------------------------

NUMBERS = ("1e300", "-1e300", "1e11", "1e12", "99999999999999999999999999", "-5", "NaN", "Infinity", "-Infinity", "0.0")

junk_line = st.one_of(
    st.binary(max_size=300),
    st.binary(max_size=40).map(lambda b: b"\x00" + b + b"\x00"),
    st.sampled_from([b"\xff\xfe\xfd", b"\xc3\x28", b"\xe2\x82", b"\xf0\x28\x8c\xbc", b"\xed\xa0\x80"]),
    st.integers(1, 200_000).map(lambda n: b"[" * n),
    st.integers(1, 200_000).map(lambda n: b'{"a":' * n),
    st.sampled_from(NUMBERS).map(lambda n: f"Step {n} | 1.0s | Loss {n} | Entropy {n}".encode()),
    st.sampled_from(NUMBERS).map(lambda n: f"99:99:99  WARNING {n}".encode()),
    st.sampled_from(NUMBERS).map(lambda n: f'{{"step": {n}, "time": {n}}}'.encode()),
    st.just(b"\x1b]0;TITLE\x07\x1b[2J\x9b31m\r"),
)
"""One line of junk (without its newline): nothing a real run writes as a meaningful record."""

HUGE_LINE_SIZES = (1 << 20, 10 << 20)
"""A 1 MB and a 10 MB line (the issue's sizes)."""


def junk_bytes(lines: list[bytes], *, newline_last: bool = True) -> bytes:
    data = b"\n".join(line.replace(b"\n", b" ") for line in lines)
    return data + (b"\n" if newline_last and data else b"")


def json_values(max_leaves: int = 12) -> st.SearchStrategy:
    """Any JSON value, numbers huge and tiny included."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**80), 2**80),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
        max_leaves=max_leaves,
    )


# --- Hazards in the file system -------------------------------------------------------------

HAZARDS = ("fifo", "loop", "dangling", "out_of_run", "directory", "unreadable_dir")


def make_hazard(path: Path, kind: str, outside: Path) -> None:
    """Put a hazard where a reader expects a file: a FIFO (opening it for reading blocks), a
    symlink to itself, a link to nothing, a link out of the run, a directory."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.is_dir() and kind != "unreadable_dir":
        import shutil

        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "loop":
        path.symlink_to(path.name)
    elif kind == "dangling":
        path.symlink_to(f"{path.name}.gone")
    elif kind == "out_of_run":
        secret = outside / "secret.txt"
        secret.write_text('{"step": 3, "time": 1.0}\n14:00:00 WARNING outside the run\n')
        path.symlink_to(secret)
    elif kind == "directory":
        path.mkdir()
    elif kind == "unreadable_dir":
        path.parent.chmod(0)


class Hang(Exception):
    """A bounded step took too long. Not an OSError (TimeoutError is one): a reader's
    `except OSError` must not swallow it and go on to block on the next FIFO."""


@contextlib.contextmanager
def bounded(seconds: float, what: str = "a check-in") -> Iterator[None]:
    """Fail (Hang) instead of hanging: a FIFO opened for reading blocks forever. The alarm
    repeats every second after the first, and a swallowed one still fails the block."""
    fired: list[bool] = []

    def expired(signum, frame):
        fired.append(True)
        raise Hang(f"{what} took more than {seconds} s (a hang)")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    if fired:
        raise Hang(f"{what} took more than {seconds} s (a hang; a reader swallowed the alarm)")


class VanishingReads:
    """Wrap a module's `open_regular` so that the file is truncated (or deleted) right after the
    first read from it: the reader sees a file change under it mid-read."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.hits = 0

    def wrap(self, real_open):
        def opener(path, *args, **kwargs):
            f = real_open(path, *args, **kwargs)
            state = {"done": False}

            def vanish() -> None:
                if not state["done"]:
                    state["done"] = True
                    self.hits += 1
                    if self.how == "truncate":
                        os.truncate(path, 0)
                    else:
                        os.unlink(path)

            def read(*a):
                data = f.read(*a)
                vanish()
                return data

            def readinto(buffer):  # readers that fill a reused buffer (tools.logscan)
                got = f.readinto(buffer)
                vanish()
                return got

            return _Reader(f, read, readinto)

        return opener


class _Reader:
    def __init__(self, f, read, readinto) -> None:
        self._f, self.read, self.readinto = f, read, readinto

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


# --- A small file system ----------------------------------------------------------------------

ROOT = os.geteuid() == 0


@contextlib.contextmanager
def small_tmpfs(size: str = "1m") -> Iterator[Path]:
    """A fresh tmpfs of `size` (needs root, as CI runs the tests); unmounted afterwards."""
    mount = Path(tempfile.mkdtemp(prefix="rlagent-tmpfs-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        mount.rmdir()


def fill(mount: Path, leave: int = 0) -> Path:
    """Fill the file system up, then free about `leave` bytes (page-rounded by tmpfs)."""
    filler = mount / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        block = b"\0" * 65536
        while True:
            try:
                os.write(fd, block)
            except OSError:
                if len(block) == 1:
                    break
                block = block[: len(block) // 2]
    finally:
        os.close(fd)
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def can_mount_tmpfs() -> bool:
    if not ROOT:
        return False
    try:
        with small_tmpfs("64k"):
            return True
    except (OSError, subprocess.CalledProcessError):
        return False
