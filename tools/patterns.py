"""What notable prime-rl log lines look like (reference/prime-rl-formats.md section 7).

Each pattern classifies one line into an event `kind` that the rules judge. Patterns only
recognise; whether a line matters (before the first step? growing?) is the rules' call.

Every alternative is text prime-rl (or the verifiers env server, vLLM, torch, NCCL, the kernel)
really prints: section 7's templates, plus a few layout-L ones read from prime-rl 7f7ce8a that
section 7 does not list (`orchestrator/scheduler.py`: `Rollout failed: {e}` when a rollout task
raises, `Cancelled {n} old rollout requests`; `orchestrator.py`: `Only {k}/{n} rollouts in the
batch are trainable`). tests/test_patterns_reference.py classifies every line of section 7.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class EventPattern:
    kind: str
    regex: re.Pattern[str]
    any_level: bool = False
    """Match on any line, not only WARNING/ERROR ones (INFO lines such as `finished`, launcher lines)."""
    needles: tuple[str, ...] = ()
    """Texts of which every match contains one: where none is in a line, its regex is not run (a
    substring test is C speed; a regex search tries every position). Empty: always run."""


def _p(kind: str, pattern: str, *, any_level: bool = False, needles: tuple[str, ...] = ()) -> EventPattern:
    return EventPattern(kind, re.compile(pattern), any_level, needles)


EVENT_PATTERNS: tuple[EventPattern, ...] = (
    _p(
        "cuda_oom",
        r"CUDA out of memory|torch\.OutOfMemoryError|OutOfMemoryError: CUDA",
        any_level=True,
        needles=("CUDA out of memory", "OutOfMemoryError"),
    ),
    _p(
        "host_oom",
        r"failed with exit code -9\b|exit code -9\b|Out of memory: Killed process|"
        r"ray\.exceptions\.OutOfMemoryError|OutOfMemoryError: Task was killed",
        any_level=True,
        needles=("exit code -9", "Out of memory: Killed process", "OutOfMemoryError"),
    ),
    _p(
        "nccl",
        r"NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|"
        r"Watchdog caught collective operation timeout",
        any_level=True,
        needles=("NCCL error", "nccl", "Watchdog caught collective operation timeout"),
    ),
    _p(
        "crash",
        r"Fatal error in (?:train|run_orchestrator|run_server)|ChildFailedError:|"
        r"Error: .+ failed with exit code (-?\d+)|^(?:Orchestrator|Trainer) failed with exit code (-?\d+)|"
        r"tearing down \(exit code (-?\d+)\)",
        any_level=True,
        needles=("Fatal error in ", "ChildFailedError:", " failed with exit code ", "tearing down (exit code "),
    ),
    _p(
        "inference_abort",
        r"Inference server is not ready after .*Aborting",
        any_level=True,
        needles=("Inference server is not ready after ",),
    ),
    _p(
        "inference_unreachable",
        r"Inference server was not reached after (\d+) seconds",
        needles=("Inference server was not reached after ",),
    ),
    _p(
        "empty_batch",
        # numbers: (finalized, consecutive, limit); L's `Attempt i/N at step s filtered out all n
        # rollouts` gives (n, i, N) through a lookahead
        r"empty train batch after (\d+) finalized episodes \(consecutive empty batches: (\d+)/(\d+)\)|"
        r"No admitted train payload after (\d+) finalized units "
        r"\(consecutive zero-output batch equivalents: (\d+)/(\d+)\)|"
        r"Attempt (?=\d+/\d+ at step \d+ filtered out all (\d+) rollouts)(\d+)/(\d+) at step",
        needles=("empty train batch after ", "No admitted train payload after ", " filtered out all "),
    ),
    _p(
        "few_trainable",
        r"Only (\d+)/(\d+) (?:effective traces|rollouts in the batch) are trainable",
        needles=(" are trainable",),
    ),
    _p(
        "off_policy_drop",
        r"Cancelled (\d+) train episodes past max_off_policy_steps|Dropped (\d+) queued traces past max_off_policy_steps|"
        r"Cancelled (\d+) old rollout requests",
        needles=(" past max_off_policy_steps", " old rollout requests"),
    ),
    _p(
        "nonfinite_dropped",
        r"Dropping (\d+) non-finite value\(s\) from metrics\.jsonl",
        needles=(" non-finite value(s) from metrics.jsonl",),
    ),
    _p(
        "env_error",
        r"Trace failed in group|Episode task failed in group|Empty trajectory in group|"
        r"request failed: |Rollout error in group|Rollout failed: |Dropping group .* failed dispatch rounds",
        needles=(" in group", "request failed: ", "Rollout failed: ", " failed dispatch rounds"),
    ),
    _p(
        "ckpt_error",
        # generic: prime-rl has no save-error template of its own (a save that raises is a
        # `Fatal error in train`); L's multi-run trainer logs `Error checkpointing run {idx}: {e}`.
        # `Failed to remove {path}: ..., skipping cleanup` is disk hygiene, not a failed save.
        # No needles: its words match in any case.
        r"^(?!Failed to remove )(?:(?i:.*?(?:fail(?:ed|ure)?|error|could not|unable to)\b.{0,60}\bcheckpoint)|"
        r"(?i:.*?checkpoint\b.{0,60}\b(?:fail(?:ed|ure)?|error)))",
    ),
    _p("broadcast_timeout", r"Trainer did not broadcast v(\d+) within", needles=("Trainer did not broadcast v",)),
    _p(
        "finished",
        r"Training finished!|RL training finished!|RL trainer finished!|Orchestrator finished\.",
        any_level=True,
        needles=(" finished",),
    ),
    _p(
        "resumed",
        r"Resuming (?:training|orchestrator) from checkpoint step (\d+)",
        any_level=True,
        needles=(" from checkpoint step ",),
    ),
    _p(
        "signal",
        r"Received SIGTERM|Received interrupt signal|Terminating all processes",
        any_level=True,
        needles=("Received SIGTERM", "Received interrupt signal", "Terminating all processes"),
    ),
    # Normal things that look alarming (findings.md): classified so rules can tell them apart.
    _p(
        "paused_normal",
        r"Orchestrator paused: waiting for trainer",
        any_level=True,
        needles=("Orchestrator paused: waiting for trainer",),
    ),
    _p("no_nvlink", r"No NVLink detected", needles=("No NVLink detected",)),
)


def classify(message: str, level: str) -> tuple[str | None, list[float]]:
    """Return the event kind of a line (or None) and the numbers its pattern captured."""
    kind, numbers = _classify(message, level in ("WARNING", "ERROR", "CRITICAL"))
    return kind, list(numbers)


# (needles, regex, kind) of the patterns a line of each level may match, in EVENT_PATTERNS' order:
# the loop below reads no attribute and tests no level (a cold read classifies tens of thousands).
_BY_LEVEL = {
    warn_or_error: tuple((p.needles, p.regex, p.kind) for p in EVENT_PATTERNS if p.any_level or warn_or_error)
    for warn_or_error in (False, True)
}


@lru_cache(maxsize=1024)
def _classify(message: str, warn_or_error: bool) -> tuple[str | None, tuple[float, ...]]:
    """classify, remembered: a long log repeats the same warning thousands of times."""
    for needles, regex, kind in _BY_LEVEL[warn_or_error]:
        if needles:  # a loop, not any(): a generator would cost more than the searches it saves
            for needle in needles:
                if needle in message:
                    break
            else:
                continue  # none of its needles is there: it cannot match
        match = regex.search(message)
        if match:
            return kind, tuple(float(g) for g in match.groups() if g is not None)
    return None, ()


_DETAIL_KINDS = frozenset({"cuda_oom", "host_oom", "nccl"})
_DETAIL_PATTERNS = tuple(p for p in EVENT_PATTERNS if p.kind in _DETAIL_KINDS)
# Any of them anywhere (none spans a line break): most tracebacks reveal none, and say so in one search.
_ANY_DETAIL = re.compile("|".join(f"(?:{p.regex.pattern})" for p in _DETAIL_PATTERNS))


def detail_kinds(detail_lines: list[str]) -> list[tuple[str, list[float], int]]:
    """Root causes a traceback reveals under a head (a `Fatal error` caused by a CUDA OOM):
    (kind, captured numbers, index of the detail line), first occurrence of each kind."""
    found: dict[str, tuple[str, list[float], int]] = {}
    if not detail_lines or not _ANY_DETAIL.search("\n".join(detail_lines)):
        return []
    for index, text in enumerate(detail_lines):
        for pattern in _DETAIL_PATTERNS:
            if pattern.kind not in found:
                match = pattern.regex.search(text)
                if match:
                    found[pattern.kind] = (pattern.kind, [float(g) for g in match.groups() if g is not None], index)
    return list(found.values())


# Each mask begins with the character class of its first character, the assertion before the match
# after it: `re` then skips the positions where that class fails in C, where a leading `\b` or
# lookbehind is tried at every position (the <n> mask 3.6 -> 2.5 us on a warning line). They match
# exactly what `\b0x[0-9a-fA-F]+\b`, `\b[0-9a-f]{6,}\b` and `(?<![A-Za-z])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?`
# match (tests/test_cold_shortcuts.py compares them on random text).
_MASKS = (  # (regex, its replacement, a text every match contains: where it is absent, the regex is not run)
    (re.compile(r"0(?<!\w0)x[0-9a-fA-F]+\b"), "<hex>", ("0x",)),
    (re.compile(r"[0-9a-f](?<!\w[0-9a-f])[0-9a-f]{5,}\b"), "<id>", ()),
    (re.compile(r"[-+\d](?<![A-Za-z][-+\d])(?:(?<=\d)\d*|(?<=[-+])\d+)(?:\.\d+)?(?:e[-+]?\d+)?"), "<n>", ()),
    (re.compile(r"'[^']{0,200}'|\"[^\"]{0,200}\""), "<str>", ("'", '"')),
)


@lru_cache(maxsize=1024)
def message_template(message: str) -> str:
    """Mask numbers, hex and ids so that a thousand identical warnings group as one."""
    for regex, repl, needed in _MASKS:
        if needed:
            for text in needed:  # a loop, not any(), as in _classify
                if text in message:
                    break
            else:
                continue
        message = regex.sub(repl, message)
    return message[:200]
