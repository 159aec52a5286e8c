"""Per-step and eval lines of both layouts (prime-rl-formats.md section 2).

H: `Step 3 |   41.2s | Loss 0.0012 | ... | Truncation 3.1%` (segment 1 is the unlabeled duration).
L: `Step 3 | Time: 12.34s | Loss: 0.0012 | ...`. Multi-env orchestrator lines continue with
`╰─ env | ...` sublines, which belong to the line above them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache

from rlagent.tools.bounds import STEP_DIGITS
from rlagent.tools.metric_names import (
    ORCHESTRATOR_LINE_KEYS,
    TRAINER_LINE_KEYS,
    TRAINER_ONLY_LABELS,
)

_STEP = re.compile(rf"^Step ({STEP_DIGITS}) \|")
# The formats doc's segment parser, plus ratios like `Trainable 112/128 (87.5%)`.
_SEGMENT = re.compile(
    r"^(?P<k>[A-Za-z][A-Za-z .\-]*?):? (?P<v>[-+]?(?:\d[\d.]*(?:e[-+]?\d+)?|nan|inf))(?P<u>\S*)(?: (?P<rest>.*))?$",
    re.I,
)
_PERCENT_IN_PARENS = re.compile(r"\(([-+]?[\d.]+|nan|inf)%\)")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_EVAL_H = re.compile(rf"^Evaluated (\S+) \(Step ({STEP_DIGITS})\) \|(.*)$")
_EVAL_L = re.compile(r"^Evaluated (\S+) in [\d.]+s \((.*)\)$")
_AVG_AT = re.compile(r"Avg@\d+=([-+]?[\d.]+(?:e[-+]?\d+)?|nan|inf)", re.I)


@dataclass
class StepLine:
    step: int
    process: str
    """`trainer` or `orchestrator`."""
    values: dict[str, float] = field(default_factory=dict)
    nonfinite: list[str] = field(default_factory=list)
    """Canonical names whose value was nan or inf."""


@dataclass
class EvalLine:
    env: str
    step: int | None
    score: float


def parse_duration(text: str) -> float | None:
    """`850ms`, `41.2s`, `2m 5s`, `1h 3m`, `1d 2h` -> seconds (prime-rl's format_time)."""
    parts = _DURATION_PART.findall(text.replace(" ", ""))
    if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
        return None
    return sum(float(n) * _DURATION_UNITS[u] for n, u in parts)


def parse_step_line(message: str, process_hint: str | None = None) -> StepLine | None:
    """Parse a step line; the process comes from its labels (trainer-only keys) or the file."""
    m = _STEP.match(message)
    if not m:
        return None
    first_line = message.split("\n", 1)[0]
    segments = [s.strip() for s in first_line.split(" | ")][1:]
    labels: dict[str, float] = {}
    duration: float | None = None
    for index, segment in enumerate(segments):
        if index == 0:
            duration = parse_duration(segment)
            if duration is not None:
                continue
        labelled = _labelled(segment)
        if labelled is not None:
            labels[labelled[0]] = labelled[1]
    is_trainer = bool(TRAINER_ONLY_LABELS & labels.keys())
    process = "trainer" if is_trainer else "orchestrator"
    if not is_trainer and "Reward" not in labels and process_hint:
        process = process_hint
    keys = TRAINER_LINE_KEYS if process == "trainer" else ORCHESTRATOR_LINE_KEYS
    line = StepLine(step=int(m.group(1)), process=process)
    if duration is not None:
        line.values["step_time"] = duration
    for label, value in labels.items():
        name = keys.get(label)
        if name is None:
            continue
        line.values[name] = value
        if not math.isfinite(value):
            line.nonfinite.append(name)
    return line


@lru_cache(maxsize=4096)
def _labelled(segment: str) -> tuple[str, float] | None:
    """(label, value) of a `Label value[unit]` segment, or None: remembered, as most segments of a
    long run repeat (`LR 3.00e-06`, `MFU 5.1%`, `Peak Mem. 23.2 GiB`, `Error 0.0%`)."""
    sm = _SEGMENT.match(segment)
    if not sm:
        return None
    value = _segment_value(sm)
    return None if value is None else (sm.group("k").strip(), value)


def _segment_value(sm: re.Match[str]) -> float | None:
    """The number of a `Label value[unit]` segment; None for junk such as `1.2.3` or `5/0`."""
    try:
        value = float(sm.group("v"))
        unit, rest = sm.group("u"), sm.group("rest") or ""
        if unit.startswith("/"):  # `Trainable 112/128 (87.5%)`: the fraction is in the parens
            pm = _PERCENT_IN_PARENS.search(rest)
            value = float(pm.group(1)) / 100 if pm else value / float(unit[1:] or "nan")
        elif unit == "%":
            value /= 100
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return value


def parse_eval_line(message: str) -> EvalLine | None:
    m = _EVAL_H.match(message)
    if m:
        for segment in m.group(3).split(" | "):
            sm = _SEGMENT.match(segment.strip())
            if sm and sm.group("k").strip() == "Reward":
                score = _number(sm.group("v"))
                return EvalLine(m.group(1), int(m.group(2)), score) if score is not None else None
        return None
    m = _EVAL_L.match(message)
    if m:
        am = _AVG_AT.search(m.group(2))
        score = _number(am.group(1)) if am else None
        if score is not None:
            return EvalLine(m.group(1), None, score)
    return None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # `1.2.3` matches the loose pattern
        return None
