"""W&B history exported as CSV (a panel's "Export CSV", or `run.history().to_csv()`).

The step column is `train/global_step` (TRL, OpenRLHF: `_step` there is a call counter), else `Step`
(panel export: the panel's x axis), else `_step`. Panel exports name columns `<run name> - <metric>` and
add `<metric>__MIN` / `<metric>__MAX` (bounds of a sampled bucket, not the metric): those are dropped and
a run-name prefix shared by every metric column is removed. Empty cells are missing values, not zeros.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from rlagent.tools.frameworks.lines import decode
from rlagent.tools.frameworks.records import MetricRow, ReadResult, as_float, read_bytes

STEP_COLUMNS = ("train/global_step", "Step", "_step")
_BOUND = re.compile(r"__(?:MIN|MAX)$")
_RUN_PREFIX = re.compile(r"^(.+?) - (.+)$")


def _metric_names(columns: list[str]) -> dict[str, str]:
    """column -> metric name, with a run-name prefix common to all of them removed."""
    prefixes = {m.group(1) if (m := _RUN_PREFIX.match(column)) else None for column in columns}
    if len(prefixes) == 1 and None not in prefixes:
        return {column: _RUN_PREFIX.match(column).group(2) for column in columns}
    return {column: column for column in columns}


def parse_csv(text: str, step_column: str | None = None) -> ReadResult[MetricRow]:
    result: ReadResult[MetricRow] = ReadResult()
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        result.notes.append("empty CSV")
        return result
    header = [column.strip() for column in header]
    candidates = (step_column,) if step_column else STEP_COLUMNS
    step_col = next((column for column in candidates if column in header), None)
    if step_col is None:
        result.notes.append(f"no step column ({', '.join(candidates)}) in the header")
        return result
    step_index = header.index(step_col)
    metric_columns = [c for i, c in enumerate(header) if i != step_index and c and not _BOUND.search(c)]
    names = _metric_names(metric_columns)
    indexes = [(header.index(column), names[column]) for column in metric_columns]
    skipped = 0
    try:
        for lineno, record in enumerate(reader, start=2):
            if not record or not any(cell.strip() for cell in record):
                continue
            step = as_float(record[step_index]) if step_index < len(record) and record[step_index].strip() else None
            if step is None or step != step:
                skipped += 1
                continue
            values: dict[str, float] = {}
            for index, name in indexes:
                cell = record[index].strip() if index < len(record) else ""
                number = as_float(cell) if cell else None
                if number is not None:
                    values[name] = number
            result.rows.append(MetricRow(step=int(step), values=values, lineno=lineno))
    except csv.Error as error:
        result.notes.append(f"CSV stopped being readable: {error}")
    if skipped:
        result.notes.append(f"{skipped} row(s) without a step skipped")
    result.meta["step_column"] = step_col
    return result


def read_wandb_csv(path: str | Path, step_column: str | None = None) -> ReadResult[MetricRow]:
    missing: ReadResult[MetricRow] = ReadResult()
    data = read_bytes(path, missing)
    return missing if data is None else parse_csv(decode(data), step_column)
