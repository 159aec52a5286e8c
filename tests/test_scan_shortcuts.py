"""prime-rl's log scan takes two shortcuts on its hot path; each says what the long way says, on
random lines built from the fragments that matter to it:

- a pattern's regex is searched only in lines holding one of its needles (tools.patterns);
- a line ending a record is known as a loguru head from its raw bytes, before it is decoded and
  parsed (tools.logscan), so the INFO chatter after a warning costs a bytes match.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from rlagent.tools import logscan, patterns
from rlagent.tools.loglines import clean, parse_head

# Text that every alternative of every pattern matches, and text that nearly does.
MATCHES = [
    "CUDA out of memory", "torch.OutOfMemoryError", "OutOfMemoryError: CUDA",
    "failed with exit code -9", "exit code -9", "Out of memory: Killed process", "ray.exceptions.OutOfMemoryError",
    "OutOfMemoryError: Task was killed",
    "NCCL error", "ncclInternalError", "ncclSystemError", "ncclUnhandledCudaError",
    "Watchdog caught collective operation timeout",
    "Fatal error in train", "Fatal error in run_orchestrator", "Fatal error in run_server", "ChildFailedError:",
    "Error: trainer failed with exit code 1", "Orchestrator failed with exit code -15", "Trainer failed with exit code 2",
    "tearing down (exit code 3)",
    "Inference server is not ready after 600s. Aborting", "Inference server was not reached after 30 seconds",
    "empty train batch after 12 finalized episodes (consecutive empty batches: 2/5)",
    "No admitted train payload after 3 finalized units (consecutive zero-output batch equivalents: 1/4)",
    "Attempt 2/3 at step 5 filtered out all 64 rollouts",
    "Only 3/64 effective traces are trainable", "Only 3/64 rollouts in the batch are trainable",
    "Cancelled 5 train episodes past max_off_policy_steps", "Dropped 4 queued traces past max_off_policy_steps",
    "Cancelled 7 old rollout requests", "Dropping 2 non-finite value(s) from metrics.jsonl",
    "Trace failed in group", "Episode task failed in group", "Empty trajectory in group", "request failed: ",
    "Rollout error in group", "Rollout failed: ", "Dropping group ab12 after 3 failed dispatch rounds",
    "Failed to save checkpoint", "CHECKPOINT write ERROR", "Failed to remove ",
    "Trainer did not broadcast v12 within", "Training finished!", "RL training finished!", "RL trainer finished!",
    "Orchestrator finished.", "Resuming training from checkpoint step 40", "Resuming orchestrator from checkpoint step 40",
    "Received SIGTERM", "Received interrupt signal", "Terminating all processes", "Orchestrator paused: waiting for trainer",
    "No NVLink detected",
]  # fmt: skip
NOISE = [" ", "x", "1", "-9", "(", ")", ": ", "/", ".", "nccl", "NCCL", "Error", "in group", "exit code", "\u00e9"]


def classify_the_long_way(message: str, warn_or_error: bool) -> tuple[str | None, tuple[float, ...]]:
    for pattern in patterns.EVENT_PATTERNS:
        if pattern.any_level or warn_or_error:
            match = pattern.regex.search(message)
            if match:
                return pattern.kind, tuple(float(g) for g in match.groups() if g is not None)
    return None, ()


def test_every_alternative_of_every_pattern_passes_its_needles():
    for text in MATCHES:
        for warn in (True, False):
            assert patterns._classify.__wrapped__(text, warn) == classify_the_long_way(text, warn), text
    kinds = {classify_the_long_way(text, True)[0] for text in MATCHES}
    assert kinds - {None} == {p.kind for p in patterns.EVENT_PATTERNS}  # the list reaches every pattern


def _cut(text: str):
    return st.integers(0, len(text)).map(lambda n: text[:n]) | st.integers(0, len(text)).map(lambda n: text[n:])


MESSAGES = st.lists(
    st.sampled_from(MATCHES) | st.sampled_from(NOISE) | st.sampled_from(MATCHES).flatmap(_cut) | st.text(max_size=3),
    max_size=8,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(MESSAGES, st.booleans())
def test_classify_with_needles_says_what_the_regexes_say(message, warn):
    assert patterns._classify.__wrapped__(message, warn) == classify_the_long_way(message, warn)


# --- the loguru head known from its bytes --------------------------------------------------------

RAW_FRAGMENTS = [
    b"\x1b[2m", b"\x1b[0m", b"\x1b[32m\x1b[1m", b"\x1b[1;31m", b"\x1b[22m", b"\x1b]0;title\x07", b"\x1b[2J", b"\x07",
    b"\r", b"\t", b"\x00", b"\xff", b"14:03:01", b"1", b":", b" ", b"   ", b"INFO", b"SUCCESS", b"WARNING", b"ERROR",
    b"CRITICAL", b"TRACE", b"DEBUG", b"WARN", b"[trainer0]:", b"[rank1]", b"[", b"]", b"{", b"x", "\u00e9".encode(),
    b"14:03:01 INFO ",
]  # fmt: skip


def _part(*fragments: bytes, size: int = 3):
    return st.lists(st.sampled_from(fragments), max_size=size).map(b"".join)


# Lines shaped like a head, each part right or nearly: prefixes, time, separator, level, what follows.
NEAR_HEAD = st.tuples(
    _part(b"\x1b[2m", b"\x1b[0m", b"[trainer0]:", b"[rank1]", b"[rank1]:", b"[:", b"]:", b"\x1b[2J", b"\x07"),
    st.sampled_from([b"14:03:01", b"14:03", b"1:03:01", b"14:03:01.5", b"\xd9\xa314:03:01"]),
    _part(b" ", b"\x1b[0m", b"\t", b"\r", b"x"),
    st.sampled_from([b"INFO", b"SUCCESS", b"WARN", b"info", b"ERRORS", b""]),
    _part(b" ", b"\x1b[0m", b"x", b"\r", size=2),
).map(b"".join)
RAW_LINES = st.lists(st.sampled_from(RAW_FRAGMENTS), max_size=12).map(b"".join) | NEAR_HEAD


@settings(max_examples=2000, deadline=None)
@given(RAW_LINES)
@example(b"[rank1]14:03:01 INFO x")  # a prefix without its colon stays: no head
@example(b"14:03:01INFO x")
@example(b"14:03:01 INFOx")
@example(b"14:03 INFO x")
def test_a_line_known_as_a_loguru_head_by_its_bytes_is_one(raw):
    if logscan._LOGURU_HEAD.match(raw):
        assert parse_head(clean(raw)) is not None


def test_the_usual_loguru_heads_are_known_by_their_bytes():
    for raw in (
        b"\x1b[2m14:02:01\x1b[0m \x1b[1m   INFO\x1b[0m \x1b[1m\x1b[22mTrain batch 16/1024\x1b[0m\x1b[0m",
        b"\x1b[2m14:03:33\x1b[0m \x1b[33m\x1b[1mWARNING\x1b[0m \x1b[33m\x1b[1m\x1b[22mTrace failed in group 1\x1b[0m",
        b"14:03:01 SUCCESS Step 1 | Reward 0.2",
        b"[trainer0]:\x1b[2m14:04:03\x1b[0m \x1b[32m\x1b[1mSUCCESS\x1b[0m \x1b[32m\x1b[1m\x1b[22mStep 1 |  1m 31s | Loss 0.0024",
    ):
        assert logscan._LOGURU_HEAD.match(raw) and parse_head(clean(raw)) is not None


LOG_LINES = [
    "\x1b[2m14:02:01\x1b[0m \x1b[1m   INFO\x1b[0m \x1b[1mTrain batch 16/1024\x1b[0m",
    "\x1b[2m14:02:02\x1b[0m \x1b[33m\x1b[1mWARNING\x1b[0m \x1b[33mTrace failed in group 5 (math) — TimeoutError\x1b[0m",
    "\x1b[2m14:02:03\x1b[0m \x1b[31m\x1b[1mERROR\x1b[0m \x1b[31mFatal error in train\x1b[0m",
    "14:02:04 SUCCESS Step 3 | Reward 0.5",
    "Traceback (most recent call last):",
    '  File "train.py", line 3, in <module>',
    "torch.OutOfMemoryError: CUDA out of memory.",
    "INFO 11-22 14:05:12 [api.py:12] request failed: boom",
    "E0824 14:26:12.609015 45716 api.py:882] NCCL error",
    "[trainer0]:14:02:05 WARNING Inference server was not reached after 30 seconds",
    "",
    "14:02:06INFO not a head",
    "\x00\x00 junk ERROR",
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(LOG_LINES), max_size=60))
def test_a_scan_finds_the_same_records_as_the_long_way(tmp_path_factory, lines):
    path = Path(tmp_path_factory.mktemp("scan")) / "orchestrator.log"
    path.write_bytes("".join(line + "\n" for line in lines).encode())
    size = path.stat().st_size
    fast = logscan.scan_file(path, 0, size, 1)
    shortcut, logscan._LOGURU_HEAD = logscan._LOGURU_HEAD, re.compile(b"(?!)")  # never matches: the long way
    try:
        slow = logscan.scan_file(path, 0, size, 1)
    finally:
        logscan._LOGURU_HEAD = shortcut
    assert fast == slow
