"""Reading a run dir that may hold anything: never block, never follow a link out, never raise
on a path that merely cannot be looked at.

A run dir is written by the training program and whoever shares the machine: a FIFO named like a
log blocks `open()` forever, a symlink may loop or point out of the run (`/dev/zero`, someone's
secrets), and a directory may be unreadable. Readers open files through `open_regular` (regular
files only, opened without blocking, inside the run) and look at paths through `is_file`,
`is_dir` and `list_dir`, which turn what they cannot see into a note instead of an exception.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
)


class UnsafeFile(OSError):
    """A path rlagent will not read: not a regular file, or a link out of the run dir."""

    def __init__(self, path: str | os.PathLike, why: str) -> None:
        super().__init__(errno.EPERM, why, str(path))


def kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def reason(exc: BaseException) -> str:
    """One short line for a note: `Permission denied`, `a FIFO, not read`, ..."""
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc) or type(exc).__name__


def check_inside(path: str | os.PathLike, root: str | os.PathLike) -> Path:
    """The real path of `path`, which must lie inside `root` (after resolving every link). Compared
    as the strings realpath gives (absolute, normalised): a reader checks every file it opens."""
    target, base = os.path.realpath(path, strict=True), os.path.realpath(root, strict=True)
    if target != base and not target.startswith(base.rstrip("/") + "/"):
        raise UnsafeFile(path, f"a link out of the run dir (to {target}), not read")
    return Path(target)


def regular_stat(path: str | os.PathLike, root: str | os.PathLike | None = None) -> os.stat_result:
    """stat of a regular file (inside `root` when given); anything else raises OSError."""
    if root is not None:
        check_inside(path, root)
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFile(path, f"{kind_of(st.st_mode)}, not read")
    return st


def open_regular(path: str | os.PathLike, root: str | os.PathLike | None = None, *, pipes: bool = False) -> BinaryIO:
    """Open a regular file for binary reading without ever blocking.

    O_NONBLOCK makes opening a FIFO return at once; the open file is then checked (fstat, so a
    swap between a check and the open cannot fool it) and refused unless it is a regular file,
    or with `pipes` a FIFO too (read like stdin: one with no writer reads as empty at once).
    """
    if root is not None:
        check_inside(path, root)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISREG(mode) or (pipes and stat.S_ISFIFO(mode))):
            raise UnsafeFile(path, f"{kind_of(mode)}, not read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_up_to(f: BinaryIO, limit: int) -> bytes:
    """`f.read(limit)`, asking first only for what the file holds: a read of n bytes allocates n
    before it reads, and 8 MB for a rollouts file of 3.7 MB cost 1.5 ms where 3.7 MB cost 0.07."""
    try:
        size = os.fstat(f.fileno()).st_size
    except OSError:
        size = 0
    want = min(limit, size + 1) if size else limit  # one byte more shows whether it has grown
    data = f.read(want)
    if len(data) == want < limit:
        data += f.read(limit - want)
    return data


def read_regular(path: str | os.PathLike, root: str | os.PathLike | None = None, limit: int = 16 << 20) -> bytes:
    """At most `limit` bytes of a regular file; a longer file raises OSError(EFBIG)."""
    with open_regular(path, root) as f:
        data = read_up_to(f, limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit >> 20} MB, not read", str(path))
    return data


def _note(notes: list[str] | None, path: Path, root: Path | None, exc: OSError) -> None:
    if notes is None:
        return
    try:
        shown = str(path.relative_to(root)) if root is not None else str(path)
    except ValueError:
        shown = str(path)
    line = f"{shown}: unreadable ({reason(exc)})"
    if line not in notes:
        notes.append(line)


_ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR})


def _stat(path: Path, notes: list[str] | None, root: Path | None) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError as exc:
        if exc.errno not in _ABSENT:
            _note(notes, path, root, exc)  # EACCES, ELOOP, ...: worth saying
        return None


def is_file(path: Path, notes: list[str] | None = None, root: Path | None = None) -> bool:
    """A regular file (links followed); what cannot be looked at is a note, never an exception."""
    st = _stat(path, notes, root)
    return st is not None and stat.S_ISREG(st.st_mode)


def is_dir(path: Path, notes: list[str] | None = None, root: Path | None = None) -> bool:
    st = _stat(path, notes, root)
    return st is not None and stat.S_ISDIR(st.st_mode)


def exists(path: Path, notes: list[str] | None = None, root: Path | None = None) -> bool:
    return _stat(path, notes, root) is not None


def not_a_directory(path: Path) -> str | None:
    """Why a path given as a run or a folder of runs is not a directory to read, in a few words
    ("no such directory", "a symlink loop", ...); None when it is one."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return "a broken symlink" if os.path.islink(path) else "no such directory"
        if exc.errno == errno.ELOOP:
            return "a symlink loop"
        if exc.errno == errno.ENOTDIR:
            return "no such directory"  # a component of it is a file
        return f"cannot be looked at ({reason(exc)})"
    return None if stat.S_ISDIR(st.st_mode) else "not a directory"


def list_names(path: Path, notes: list[str] | None = None, root: Path | None = None) -> list[str]:
    """Names in a directory, as `list_dir` but without a Path for each (a rollouts dir has one
    entry per step, and a warm check-in wants only the newest)."""
    try:
        return os.listdir(path)
    except OSError as exc:
        if exc.errno not in _ABSENT:
            _note(notes, path, root, exc)
        return []


def list_dir(path: Path, notes: list[str] | None = None, root: Path | None = None) -> list[Path]:
    """Entries of a directory; a missing one is empty, an unreadable one is empty and a note."""
    try:
        return list(path.iterdir())
    except OSError as exc:
        if exc.errno not in _ABSENT:
            _note(notes, path, root, exc)
        return []
