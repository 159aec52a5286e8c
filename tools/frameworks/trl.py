"""TRL (transformers Trainer): console dict lines, trainer_state.json, completions parquet, checkpoints.

Console (frameworks.md 2.1; `ProgressCallback.on_log` writes `str(logs)`):
  transformers <= 4.57: `{'loss': 0.0012, 'grad_norm': 0.284..., ..., 'epoch': 0.12}`  (raw floats, bare nan)
  transformers >= 5.0:  `{'loss': '0.001234', 'grad_norm': '0.2841', ...}`             (`.4g` strings)
The console has no step: rows come back in order and `assign_steps` numbers them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlagent.tools import safefs
from rlagent.tools.bounds import STEP_DIGITS, plausible_step
from rlagent.tools.frameworks.lines import decode, iter_lines, read_text
from rlagent.tools.frameworks.pydict import parse_py_dict
from rlagent.tools.frameworks.records import Checkpoints, MetricRow, ReadResult, as_float, numeric_values, read_bytes

# Keys that make a dict a training log record (GRPO/SFT: transformers' loss/learning_rate; PPOTrainer: lr).
_TRAIN_KEYS = frozenset({"loss", "learning_rate", "grad_norm", "lr", "objective/kl"})
_SUMMARY_KEYS = frozenset({"train_runtime", "train_loss", "train_samples_per_second"})
_is_eval = operator.methodcaller("startswith", "eval_")  # mapped over a row's keys: every console row asks
_RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s*")  # torchrun --tee / local_ranks_filter


def classify(keys) -> str | None:
    """`train`, `val` (eval_* keys), `summary` (end-of-training totals) or None (not a Trainer log)."""
    return _classify(tuple(keys))


@functools.lru_cache(maxsize=1024)
def _classify(names: tuple[str, ...]) -> str | None:
    """Asked once per key set: every row of a log has one of a few (a seventh of the time per row)."""
    keys = set(names)
    if keys & _SUMMARY_KEYS:
        return "summary"
    if any(map(_is_eval, keys)):
        return "val"
    if keys & _TRAIN_KEYS:
        return "train"
    return None


def parse_dict_line(line: str, lineno: int | None = None) -> MetricRow | None:
    """One console log dict (either transformers style) -> row with step None, or None."""
    text = _RANK_PREFIX.sub("", line.strip())
    if not text.startswith("{'"):
        return None
    data = parse_py_dict(text)
    if data is None:
        return None
    kind = classify(data)
    if kind is None:
        return None
    return MetricRow(step=None, values=numeric_values(data), lineno=lineno, kind=kind)


def parse_console(text: str) -> list[MetricRow]:
    rows = []
    for line in iter_lines(text):
        row = parse_dict_line(line.text, line.lineno)
        if row is not None:
            rows.append(row)
    return rows


def read_console(path: str | Path) -> list[MetricRow]:
    return parse_console(read_text(path))


def assign_steps(
    rows: list[MetricRow],
    logging_steps: int,
    *,
    first_step: int = 0,
    logging_first_step: bool = False,
    max_steps: int | None = None,
) -> list[MetricRow]:
    """Number console rows: the k-th train row is step first_step + k * logging_steps (Trainer logs when
    global_step % logging_steps == 0; with `logging_first_step` also at step 1), capped at `max_steps`.
    Eval and summary rows get the step of the train row before them. `first_step` is the step a resumed
    run restarted from."""
    if logging_steps < 1:
        raise ValueError("logging_steps must be >= 1")
    out = []
    count = 0
    current = first_step
    for row in rows:
        if row.kind == "train":
            if logging_first_step and count == 0 and first_step == 0:
                current = 1
            else:
                current = (current // logging_steps + 1) * logging_steps
                if max_steps is not None:
                    current = min(current, max_steps)
            count += 1
        out.append(dataclasses.replace(row, step=current))
    return out


def assign_steps_from_epoch(rows: list[MetricRow], steps_per_epoch: float) -> list[MetricRow]:
    """Number rows from their `epoch` value (rounded to 2 decimals by 4.x, `.4g` by 5.x, so approximate)."""
    out = []
    for row in rows:
        epoch = row.values.get("epoch")
        step = round(epoch * steps_per_epoch) if epoch is not None and epoch == epoch else None
        out.append(dataclasses.replace(row, step=step))
    return out


def read_trainer_state(path: str | Path, root: str | Path | None = None) -> ReadResult[MetricRow]:
    """`checkpoint-N/trainer_state.json`: `log_history` rows (each with `step`; Python json writes NaN).
    meta holds global_step, logging_steps, max_steps, epoch when present."""
    result: ReadResult[MetricRow] = ReadResult()
    data = read_bytes(path, result, root)
    if data is None:
        return result
    try:
        state = json.loads(decode(data))
    except ValueError as error:
        result.notes.append(f"trainer_state.json is not valid JSON ({getattr(error, 'msg', error)}); truncated or being written?")
        return result
    except RecursionError:
        result.notes.append("trainer_state.json is nested too deep; not read")
        return result
    if not isinstance(state, dict):
        result.notes.append("trainer_state.json is not an object")
        return result
    for key in ("global_step", "logging_steps", "max_steps", "epoch"):
        if key in state:
            result.meta[key] = state[key]
    history = state.get("log_history")
    if not isinstance(history, list):
        result.notes.append("no log_history list")
        return result
    for entry in history:
        if not isinstance(entry, dict):
            continue
        step = entry.get("step")
        values = numeric_values({key: value for key, value in entry.items() if key != "step"})
        result.rows.append(
            MetricRow(
                step=int(step) if plausible_step(step) else None,  # NaN, 1e300, -5: no step
                values=values,
                kind=classify(entry) or "train",
            )
        )
    return result


@dataclass
class CompletionSample:
    """One row of `output_dir/completions/completions_{step:05d}.parquet` (GRPOTrainer.log)."""

    step: int | None
    prompt: Any
    completion: Any
    advantage: float | None
    scores: dict[str, float] = field(default_factory=dict)
    """Numeric columns besides step/advantage: one per reward function (numeric extras land here too)."""
    extra: dict[str, Any] = field(default_factory=dict)


_COMPLETION_CORE = ("step", "prompt", "completion", "advantage")


def read_completions(path: str | Path, root: str | Path | None = None) -> ReadResult[CompletionSample]:
    """One completions parquet file, or every `completions_*.parquet` of a directory in step order."""
    result: ReadResult[CompletionSample] = ReadResult()
    root = Path(path)
    if safefs.is_dir(root, result.notes):
        files = sorted(
            p for p in safefs.list_dir(root, result.notes) if p.name.startswith("completions_") and p.suffix == ".parquet"
        )
    else:
        files = [root]
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        result.notes.append("pyarrow is not installed; completions not read")
        return result
    for file in files:
        try:  # read through safefs: pyarrow would open a FIFO (and block) or follow a link anywhere
            data = safefs.read_regular(file, root, limit=MAX_PARQUET_BYTES)
        except OSError as error:
            result.notes.append(f"{file.name}: unreadable ({safefs.reason(error)})")
            continue
        try:
            records = pq.read_table(pa.BufferReader(data)).to_pylist()
        except Exception as error:  # pyarrow raises several types (ArrowInvalid, OSError) for bad files
            result.notes.append(f"{file.name}: not readable as parquet ({type(error).__name__})")
            continue
        for record in records:
            step = record.get("step")
            scores: dict[str, float] = {}
            extra: dict[str, Any] = {}
            for key, value in record.items():
                if key in _COMPLETION_CORE or key.startswith("__index_level_"):
                    continue
                number = as_float(value) if isinstance(value, int | float) and value is not None else None
                if number is not None:
                    scores[key] = number
                else:
                    extra[key] = value
            advantage = record.get("advantage")
            result.rows.append(
                CompletionSample(
                    step=int(step) if plausible_step(step) else None,
                    prompt=record.get("prompt"),
                    completion=record.get("completion"),
                    advantage=as_float(advantage) if advantage is not None else None,
                    scores=scores,
                    extra=extra,
                )
            )
    return result


_CKPT_DIR = re.compile(rf"^checkpoint-({STEP_DIGITS})$", re.ASCII)
MAX_PARQUET_BYTES = 256 << 20
"""A completions file larger than this is not read (one step's samples are far smaller)."""


def checkpoints(output_dir: str | Path) -> Checkpoints:
    """`checkpoint-N/` folders (transformers PREFIX_CHECKPOINT_DIR); a checkpoint without
    trainer_state.json is reported (a save that did not finish)."""
    root = Path(output_dir)
    found = Checkpoints()
    if not safefs.is_dir(root, found.notes):
        found.notes.append(f"{root} is not a directory")
        return found
    for path in safefs.list_dir(root, found.notes):
        match = _CKPT_DIR.match(path.name)
        if match and safefs.is_dir(path, found.notes):
            found.steps.append(int(match.group(1)))
            if not safefs.is_file(path / "trainer_state.json", found.notes):
                found.notes.append(f"{path.name} has no trainer_state.json")
    found.steps.sort()
    found.latest = found.steps[-1] if found.steps else None
    return found
