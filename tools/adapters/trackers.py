"""Tracker files any framework may write beside its console log, read live from their cursors:
TensorBoard event files, wandb run files (`run-<id>.wandb`, offline or online) and W&B history CSV
exports (frameworks.md 5). Their rows go under the canonical names like the console's, so a run that
logs only to TensorBoard or wandb is still judged.

Event files and `.wandb` files grow record by record: each check-in reads from the offset past the
last whole record it consumed, so a record still being written is read next time. A CSV export is
written once: it is read again whole when it changes.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rlagent.models.observation import FileCursor
from rlagent.tools.adapters import lineblocks
from rlagent.tools.adapters.base import FileRead
from rlagent.tools.adapters.console import HeldRows, add_row
from rlagent.tools.frameworks import wandb_csv, wandb_offline
from rlagent.tools.frameworks.records import MetricRow, ReadResult
from rlagent.tools.safefs import open_regular
from rlagent.tools.tail import plan_read

MAX_READ = 64 << 20
"""Bytes of a wandb run file read and split into records at a time."""
CHUNK = 4 << 20
"""Bytes of an event file read at a time."""
MAX_RECORD = 64 << 20
"""A TFRecord longer than this is corruption, not a scalar event."""
_MAX_FILES = 40
_DEPTH = 5
_SKIP = ("global_step", "checkpoint-", "_actor", "_critic", "ckpt", "__pycache__", ".hydra", "rollouts", "files", "completions")
_STEP_KEY = {"trl": "train/global_step", "openrlhf": "train/global_step"}
"""wandb's `_step` counts log calls in TRL and OpenRLHF; their global step is logged as a metric."""


def tracker_files(run_dir: Path) -> list[Path]:
    """Event files, `.wandb` files and CSV exports under `run_dir`, a few folders down at most."""
    found: list[Path] = []
    base = len(run_dir.parts)
    for dirpath, dirnames, filenames in os.walk(run_dir):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(_SKIP))
        if len(here.parts) - base >= _DEPTH:
            dirnames[:] = []
        for name in sorted(filenames):
            if "tfevents" in name or (name.startswith("run-") and name.endswith(".wandb")) or _is_export(here, name, base):
                found.append(here / name)
        if len(found) >= _MAX_FILES:
            break
    return found[:_MAX_FILES]


def _is_export(here: Path, name: str, base: int) -> bool:
    return name.endswith(".csv") and len(here.parts) - base <= 1


def read_trackers(run_dir: Path, framework: str, cursors: dict[str, FileCursor]) -> list[FileRead]:
    out = []
    for path in tracker_files(run_dir):
        rel = str(path.relative_to(run_dir))
        if path.name.endswith(".csv"):
            read = read_csv_export(path, rel, cursors.get(rel), framework)
        elif path.name.endswith(".wandb"):
            read = read_wandb_run(path, rel, cursors.get(rel), framework)
        else:
            read = read_event_file(path, rel, cursors.get(rel), framework)
        if read is not None:
            out.append(read)
    return out


def _start(path: Path, rel: str, cursor: FileCursor | None) -> tuple[FileRead, int, int] | FileRead:
    """(an empty read with the new cursor, start, end) or a read carrying the reason it cannot be read."""
    try:
        plan, new_cursor = plan_read(path, rel, cursor)
    except OSError as exc:
        return FileRead(rel, cursor, notes=[f"{rel}: unreadable ({exc.strerror or exc})"])
    out = FileRead(rel, new_cursor, fresh=plan.fresh, notes=[plan.note] if plan.note else [])
    return out, plan.start, plan.end


def _note_behind(out: FileRead, rel: str, start: int, end: int) -> None:
    """The read stopped at its deadline with bytes left: the check-in says it is behind the run."""
    assert out.cursor is not None
    out.behind = True
    out.notes.append(
        f"{rel}: {(out.cursor.offset - start) >> 20} of {(end - start) >> 20} MB new read in "
        f"{lineblocks.READ_BUDGET_S:.0f} s, the rest at the next check-ins, oldest first: this check-in is behind the run"
    )


def _rows_into(out: FileRead, framework: str, rows: list[MetricRow]) -> None:
    for row in rows:
        if row.step is not None and row.values:
            add_row(out, framework, row, None)


def read_event_file(path: Path, rel: str, cursor: FileCursor | None, framework: str) -> FileRead:
    """Scalar summaries of the whole TFRecords after the cursor (`simple_value`, as torch's SummaryWriter
    writes them, or a one-element float tensor). Read CHUNK bytes at a time, the steps held as the
    collector keeps them (tools.steprows): 64 MB of a long run's events is tens of thousands of steps."""
    from tensorboard.compat.proto import event_pb2

    started = _start(path, rel, cursor)
    if isinstance(started, FileRead):
        return started
    out, start, end = started
    held = HeldRows(out)
    pos, bad = start, 0  # pos: the end of the last whole record
    data = b""
    deadline, stopped = lineblocks.read_deadline(), False  # records are found only in order, as a TRL console's rows
    try:
        with open_regular(path) as handle:  # swapped for a FIFO since planned: refused, never a hang
            handle.seek(start)
            while pos + len(data) < end:
                if pos > start and time.monotonic() >= deadline:
                    stopped = True
                    break
                chunk = handle.read(min(CHUNK, end - pos - len(data)))
                if not chunk:
                    break
                data += chunk
                steps: dict[int, MetricRow] = {}
                used, stop = _records(data, event_pb2, steps)
                part = FileRead(rel, None)
                _rows_into(part, framework, [steps[s] for s in sorted(steps)])
                held.take(part)
                bad += stop.bad
                pos, data = pos + used, data[used:]
                if stop.corrupt:
                    out.notes.append(f"{rel}: a record at byte {pos} claims {stop.corrupt} bytes; stopped reading (corrupt file)")
                    break
    except OSError as exc:
        return FileRead(rel, cursor, notes=[f"{rel}: unreadable ({exc.strerror or exc})"])
    assert out.cursor is not None
    out.cursor.offset = pos
    out.bytes_read = pos - start
    if stopped:
        _note_behind(out, rel, start, end)
    if bad:
        out.notes.append(f"{rel}: {bad} record(s) could not be decoded")
    held.finish()
    return out


@dataclass
class _Stop:
    bad: int = 0
    corrupt: int = 0
    """The length a record claimed past MAX_RECORD (0: none did)."""


def _records(data: bytes, event_pb2, steps: dict[int, MetricRow]) -> tuple[int, _Stop]:
    """Decode the whole TFRecords at the start of `data` into `steps` (one row a step, its newest wall
    time); (bytes used, what stopped it)."""
    pos, stop = 0, _Stop()
    while len(data) - pos >= 12:
        (length,) = struct.unpack_from("<Q", data, pos)
        if length > MAX_RECORD:
            stop.corrupt = length
            break
        if len(data) - pos < 12 + length + 4:
            break  # still being written (or in the next chunk)
        body = data[pos + 12 : pos + 12 + length]
        pos += 12 + length + 4
        try:
            event = event_pb2.Event.FromString(body)
        except Exception:  # protobuf's DecodeError; a bad record is skipped, not fatal
            stop.bad += 1
            continue
        if not event.HasField("summary"):
            continue
        row = steps.setdefault(event.step, MetricRow(step=int(event.step), values={}))
        row.time = max(row.time or 0.0, event.wall_time)
        for value in event.summary.value:
            number = _scalar(value)
            if number is not None:
                row.values[value.tag] = number
    return pos, stop


def _scalar(value) -> float | None:
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind == "tensor":
        tensor = value.tensor
        for field in (tensor.float_val, tensor.double_val, tensor.int64_val, tensor.int_val):
            if len(field) == 1:
                return float(field[0])
    return None


def read_wandb_run(path: Path, rel: str, cursor: FileCursor | None, framework: str) -> FileRead:
    """History rows of the whole records after the cursor (a run still being written is fine)."""
    started = _start(path, rel, cursor)
    if isinstance(started, FileRead):
        return started
    out, start, end = started
    result: ReadResult[MetricRow] = ReadResult()
    held = HeldRows(out)
    notes: list[str] = []
    done, deadline, stopped = start, lineblocks.read_deadline(), False
    try:
        with open_regular(path) as handle:  # swapped for a FIFO since planned: refused, never a hang
            while done < end:  # MAX_READ at a time, each piece from the end of the last whole record
                if done > start and time.monotonic() >= deadline:
                    stopped = True
                    break
                handle.seek(done)
                data = handle.read(min(end - done, MAX_READ))
                payloads, piece_notes, piece_done = wandb_offline.records_from(data, done)
                del data
                notes += piece_notes
                for first in range(0, len(payloads), _BATCH):  # a batch at a time: the rows held stay bounded
                    batch: ReadResult[MetricRow] = ReadResult()
                    wandb_offline.history_rows(payloads[first : first + _BATCH], _STEP_KEY.get(framework), batch)
                    part = FileRead(rel, None)
                    _rows_into(part, framework, batch.rows)
                    held.take(part)
                    result.notes += batch.notes
                    result.meta.update(batch.meta)
                if piece_done == done:
                    break  # no whole record in the piece: the rest is still being written
                done = piece_done
    except OSError as exc:
        return FileRead(rel, cursor, notes=[f"{rel}: unreadable ({exc.strerror or exc})"])
    out.notes += [f"{rel}: {note}" for note in dict.fromkeys(notes + _summed(result.notes)) if "still being written" not in note]
    assert out.cursor is not None
    out.cursor.offset = done
    out.bytes_read = done - start
    if stopped:
        _note_behind(out, rel, start, end)
    held.finish()
    if "exit_code" in result.meta:
        out.notes.append(f"{rel}: the wandb run ended with exit code {result.meta['exit_code']}")
    return out


_BATCH = 4096
"""wandb records decoded at a time."""


def _summed(notes: list[str]) -> list[str]:
    """The batches' `N record(s) could not be decoded` notes as one."""
    bad = [n for n in notes if n.endswith(" record(s) could not be decoded")]
    total = sum(int(n.split(" ", 1)[0]) for n in bad)
    return [n for n in notes if n not in bad] + ([f"{total} record(s) could not be decoded"] if total else [])


def read_csv_export(path: Path, rel: str, cursor: FileCursor | None, framework: str) -> FileRead | None:
    """A W&B history CSV, read whole when it changed; None for a CSV that is not one (no step column)."""
    started = _start(path, rel, cursor)
    if isinstance(started, FileRead):
        return started
    out, start, end = started
    if start == end and not out.fresh:
        return out
    result = wandb_csv.read_wandb_csv(path)
    if "step_column" not in result.meta:
        return None
    assert out.cursor is not None
    out.cursor.offset = end
    out.bytes_read = end
    out.fresh = True
    out.notes += [f"{rel}: {note}" for note in result.notes]
    _rows_into(out, framework, result.rows)
    if out.rows:
        out.newest = out.newest or datetime.fromtimestamp(path.stat().st_mtime, UTC)
    return out
