"""A person's side of the approval gate: the request as text, and the yes/no prompt (default No,
bounded by a timeout).

The request's text (`render_request`) is a pure function of the launcher's `interrupt()` payload,
shown by `check`, `run`, `demo`, `approve` and `status`; it lives here, not in the launcher node,
so the CLI imports text rendering and the prompt, never a graph node. The prompt reads the answer
straight from the file descriptor with `select`, so the timeout holds even on a terminal in
canonical mode and nothing is left half-read in Python's stdin buffer.
"""

from __future__ import annotations

import os
import select
import sys
import time
from enum import StrEnum
from typing import TextIO

from rlagent.models.actions import ApprovalRequest
from rlagent.tools import interrupts
from rlagent.tools.templates import render


def render_request(request: ApprovalRequest, run_dir: str) -> str:
    """The approval prompt's text: the command, why, the verdicts, the expiry (prompts/approval_request.j2;
    log text made terminal-safe there)."""
    return render("approval_request.j2", request=request, run_dir=run_dir)


class Answer(StrEnum):
    YES = "yes"
    NO = "no"
    TIMEOUT = "timeout"


def interactive(stream: TextIO | None = None) -> bool:
    """A person can answer: stdin is a terminal."""
    stream = stream or sys.stdin
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def ask(question: str, *, timeout_s: float, stdin: TextIO | None = None, stdout: TextIO | None = None) -> Answer:
    """Print `question [y/N]` and wait at most `timeout_s` for a line. Only `y`/`yes` is yes; an
    empty line, anything else or end of input is no; silence until the timeout is TIMEOUT."""
    interrupts.raise_if_ctrl_c()  # a Ctrl-C dropped during the check-in stops here, not after an answer
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    stdout.write(f"{question} [y/N] ")
    stdout.flush()
    fd = stdin.fileno()
    deadline = time.monotonic() + timeout_s
    buffer = b""
    while b"\n" not in buffer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            stdout.write("\n")
            stdout.flush()
            return Answer.TIMEOUT
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 1024)
        if not chunk:
            break
        buffer += chunk
    answer = buffer.split(b"\n", 1)[0].decode("utf-8", "replace").strip().lower()
    return Answer.YES if answer in ("y", "yes") else Answer.NO
