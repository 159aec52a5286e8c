"""Row and result types shared by the framework readers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from rlagent.tools.bounds import NUMBER
from rlagent.tools.safefs import open_regular

T = TypeVar("T")


@dataclass
class MetricRow:
    """One logged set of metrics, values under the framework's raw names."""

    step: int | None
    """Training step; None where the source does not say (TRL console) until assigned."""
    values: dict[str, float]
    lineno: int | None = None
    """1-based line of the source file or text (`\\n` lines; `\\r` segments share their line)."""
    kind: str = "train"
    """`train`, `val` (validation/eval only) or `summary` (end-of-training totals)."""
    time: float | None = None
    """Unix wall time when the source has one."""


@dataclass
class ReadResult(Generic[T]):
    """What a reader could read, and notes about what it could not (never an exception for bad input)."""

    rows: list[T] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Checkpoints:
    """Checkpoint steps found on disk and what the framework's tracker file says is the latest."""

    steps: list[int] = field(default_factory=list)
    latest: int | None = None
    """Step named by the tracker file (verl `latest_checkpointed_iteration.txt`, DeepSpeed `latest`)."""
    notes: list[str] = field(default_factory=list)


def read_bytes(path, result: ReadResult, root=None) -> bytes | None:
    """A file's bytes, or None with a note: a file can vanish or be rotated between listing and reading."""
    try:
        # Never a FIFO or a device (they block or never end); inside `root` when given (no link out of the run).
        with open_regular(path, root) as handle:
            return handle.read()
    except OSError as error:
        result.notes.append(f"cannot read {path}: {error.strerror or error}")
        return None


def as_float(value: Any) -> float | None:
    """A metric value as float: numbers and bools as such, None (NaN written as null) as nan, numeric
    strings (transformers >= 5 prints `.4g` strings) parsed; anything else None."""
    if value is None:
        return float("nan")
    if isinstance(value, NUMBER):
        try:
            return float(value)
        except OverflowError:  # an integer beyond any float: junk
            return None
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def numeric_values(data: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in data.items():
        number = as_float(value)
        if number is not None:
            out[str(key)] = number
    return out
