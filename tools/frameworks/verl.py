"""verl: console step lines, the `file` logger JSONL, rollout dumps and checkpoints (frameworks.md 1.1-1.4).

Console (`verl/utils/logger/aggregate_logger.py` concat_dict_to_str):
  before v0.5:  `step:0 - timing/gen:21.470 - ...`                       (`f"{k}:{v:.3f}"`)
  v0.5 and on:  `step:12 - actor/pg_loss:np.float64(-0.0021) - ...`     (`pprint.pformat(v)`, numpy 2 reprs)
Only numbers are printed; bools print as True/False; NaN as `nan` or `np.float64(nan)`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlagent.tools import safefs
from rlagent.tools.bounds import STEP_DIGITS, plausible_step
from rlagent.tools.frameworks.lines import decode, iter_lines, read_text
from rlagent.tools.frameworks.records import Checkpoints, MetricRow, ReadResult, as_float, numeric_values, read_bytes

# `step:N - ` not preceded by a word char or `/` (so `timing_s/step:` and `training/global_step:` keys
# never start a line); searched, not matched, because a tqdm bar can be glued in front of it.
_STEP = re.compile(r"(?:^|[^\w/])step:(\d+) - (.*)$")
_STEP_AT = re.compile(r"step:(\d+) - (.*)$")  # matched where step_match found `step:`
_NP_WRAP = re.compile(r"^(?:np|numpy)\.\w+\((.*)\)$")
_NUMPY_BOOL = {"np.True_": 1.0, "np.False_": 0.0, "True": 1.0, "False": 0.0}
_NP_PREFIXES = ("np.", "numpy.")
_VALIDATION_PREFIXES = ("val-core/", "val-aux/", "val/")  # `val/` is older verl


def parse_value(text: str) -> float | None:
    """One printed value: `0.43`, `np.float64(0.43)`, `np.int64(3)`, `nan`, `inf`, `True`; else None."""
    if not text.startswith(_NP_PREFIXES):  # float() of those raises, and a raise costs more than the test
        try:  # most values are plain numbers (a step line holds ~70): float() first, as it would end anyway
            return float(text)
        except ValueError:
            pass
    text = text.strip()
    while True:
        match = _NP_WRAP.match(text)
        if not match:
            break
        text = match.group(1).strip()
    if text in _NUMPY_BOOL:
        return _NUMPY_BOOL[text]
    try:
        return float(text)
    except ValueError:
        return None


def step_match(line: str) -> re.Match[str] | None:
    """`_STEP.search(line)`, found from each `step:` in the line rather than tried at every character
    of a 3 KB step line: the first `step:` not after a word character or `/` whose `N - ` follows."""
    at = line.find("step:")
    while at != -1:
        if at == 0 or not (line[at - 1].isalnum() or line[at - 1] in "_/"):  # \w is isalnum() or `_`
            match = _STEP_AT.match(line, at)
            if match is not None:
                return match
        at = line.find("step:", at + 1)
    return None


def parse_step_line(line: str, lineno: int | None = None) -> MetricRow | None:
    """A verl console step line (already preprocessed) -> row, or None if it is not one."""
    match = step_match(line)
    if not match:
        return None
    values: dict[str, float] = {}
    for token in match.group(2).split(" - "):
        key, sep, raw = token.rpartition(":")
        key = key.strip()
        value = parse_value(raw) if sep else None
        if key and value is not None:
            values[key] = value
    if not values:
        return None
    kind = "val" if all(key.startswith(_VALIDATION_PREFIXES) for key in values) else "train"
    return MetricRow(step=int(match.group(1)), values=values, lineno=lineno, kind=kind)


def parse_console(text: str) -> list[MetricRow]:
    """Every step line of a console log, in order (step 0 = initial validation, kind `val`)."""
    rows = []
    for line in iter_lines(text):
        row = parse_step_line(line.text, line.lineno)
        if row is not None:
            rows.append(row)
    return rows


def read_console(path: str | Path) -> list[MetricRow]:
    return parse_console(read_text(path))


def read_file_logger(path: str | Path) -> ReadResult[MetricRow]:
    """verl's `file` logger JSONL: one `{"step": N, "data": {...}}` per log call; NaN/Inf are `null`."""
    result: ReadResult[MetricRow] = ReadResult()
    data = read_bytes(path, result)
    if data is None:
        return result
    bad = 0
    lines = decode(data).split("\n")
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            step = obj["step"]
            if not plausible_step(step):
                raise ValueError("step out of range")
            step = int(step)
            data = obj["data"]
            if not isinstance(data, dict):
                raise TypeError("data is not an object")
        except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: JSON nested too deep
            if index == len(lines) - 1:
                result.notes.append(f"last line {index + 1} is incomplete (file still being written?)")
            else:
                bad += 1
            continue
        values = numeric_values(data)
        kind = "val" if values and all(key.startswith(_VALIDATION_PREFIXES) for key in values) else "train"
        result.rows.append(MetricRow(step=step, values=values, lineno=index + 1, kind=kind))
    if bad:
        result.notes.append(f"{bad} line(s) are not file-logger rows")
    return result


@dataclass
class RolloutSample:
    """One line of `{rollout_data_dir}/{step}.jsonl` (RayPPOTrainer._dump_generations)."""

    step: int | None
    input: str
    output: str
    gts: Any
    score: float | None
    extra: dict[str, Any] = field(default_factory=dict)
    """Reward extra-info columns (e.g. `acc`, `pred`)."""


_ROLLOUT_CORE = ("input", "output", "gts", "score", "step")


def read_rollouts(path: str | Path) -> ReadResult[RolloutSample]:
    result: ReadResult[RolloutSample] = ReadResult()
    data = read_bytes(path, result)
    if data is None:
        return result
    bad = 0
    for line in decode(data).split("\n"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: JSON nested too deep
            bad += 1
            continue
        if not isinstance(obj, dict) or "output" not in obj:
            bad += 1
            continue
        step = obj.get("step")
        result.rows.append(
            RolloutSample(
                step=int(step) if plausible_step(step) else None,
                input=str(obj.get("input", "")),
                output=str(obj.get("output", "")),
                gts=obj.get("gts"),
                score=as_float(obj.get("score")) if "score" in obj else None,
                extra={key: value for key, value in obj.items() if key not in _ROLLOUT_CORE},
            )
        )
    if bad:
        result.notes.append(f"{bad} line(s) could not be read as rollout samples (truncated or not JSON)")
    return result


def rollout_files(directory: str | Path) -> dict[int, Path]:
    """step -> `{step}.jsonl` in a `rollout_data_dir` / `validation_data_dir`."""
    out: dict[int, Path] = {}
    for path in safefs.list_dir(Path(directory)):
        if path.suffix == ".jsonl" and _STEP_NAME.fullmatch(path.stem):  # a step within bounds.MAX_STEP
            out[int(path.stem)] = path
    return dict(sorted(out.items()))


def newest_rollout_file(directory: str | Path) -> tuple[int, Path] | None:
    """The newest step's `{step}.jsonl` of `rollout_files`, found from the names alone (a run of
    thousands of steps has as many files; a warm check-in wants one)."""
    newest: tuple[int, str] | None = None
    for name in safefs.list_names(Path(directory)):
        stem, _, suffix = name.rpartition(".")
        if suffix == "jsonl" and _STEP_NAME.fullmatch(stem):  # "jsonl" alone: an empty stem, no step
            newest = max(newest, (int(stem), name)) if newest else (int(stem), name)
    return (newest[0], Path(directory) / newest[1]) if newest else None


_STEP_NAME = re.compile(STEP_DIGITS, re.ASCII)
_CKPT_DIR = re.compile(rf"^global_step_({STEP_DIGITS})$", re.ASCII)
TRACKER_FILE = "latest_checkpointed_iteration.txt"


def checkpoints(default_local_dir: str | Path) -> Checkpoints:
    """`global_step_N/` folders and the `latest_checkpointed_iteration.txt` tracker (holds `N`)."""
    root = Path(default_local_dir)
    found = Checkpoints()
    if not safefs.is_dir(root, found.notes):
        found.notes.append(f"{root} is not a directory")
        return found
    found.steps = sorted(
        int(m.group(1)) for p in safefs.list_dir(root, found.notes) if (m := _CKPT_DIR.match(p.name)) and safefs.is_dir(p)
    )
    tracker = root / TRACKER_FILE
    if safefs.is_file(tracker, found.notes):
        try:
            text = decode(safefs.read_regular(tracker, limit=4096)).strip()
        except OSError as exc:
            found.notes.append(f"{TRACKER_FILE}: unreadable ({safefs.reason(exc)})")
            return found
        if _STEP_NAME.fullmatch(text):
            found.latest = int(text)
            if found.latest not in found.steps:
                found.notes.append(f"{TRACKER_FILE} names step {found.latest} but global_step_{found.latest}/ is missing")
        else:
            found.notes.append(f"{TRACKER_FILE} does not hold a step number: {text[:40]!r}")
    elif found.steps:
        # not written with actor.checkpoint.async_save
        found.notes.append(f"no {TRACKER_FILE} (async save, or the save did not finish)")
    return found
