"""wandb offline runs: history rows from `wandb/offline-run-*/run-<id>.wandb` (frameworks.md 5.2).

The file is a LevelDB log: a 7-byte header (`:W&B`, magic 0xBEE1, version 0), then 32 KiB blocks of
records `<IHB` (crc32 seeded with the crc32 of the type byte, length, type FULL/FIRST/MIDDLE/LAST), zero
padding where fewer than 7 bytes are left in a block. Each payload is a `wandb_internal.proto` Record.

Only three messages are needed, so they are decoded by hand (field numbers from wandb 0.31.0's
`wandb.proto.wandb_internal_pb2` descriptors) rather than installing wandb (~125 MB with its Go core):
  Record:        history = 2, exit = 18
  HistoryRecord: item = 1 (repeated HistoryItem), step = 2 (HistoryStep: num = 1)
  HistoryItem:   key = 1, nested_key = 2 (repeated), none = 3, boolean = 4, integer = 5 (sint64),
                 number = 6 (double), text = 7, json = 8, value_json = 16
  RunExitRecord: exit_code = 1
wandb 0.31 writes every metric as one `nested_key` element holding the full "a/b/c" name and its value as
`value_json` (NaN -> "NaN", inf -> "Infinity").
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from rlagent.tools.bounds import NUMBER
from rlagent.tools.frameworks.records import MetricRow, ReadResult, as_float, read_bytes

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32 * 1024
RECORD_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


class _Truncated(Exception):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise _Truncated
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 70:
            raise ValueError("varint too long")


def _fields(data: bytes) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of one protobuf message: ints for varint, bytes otherwise."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos > len(data):
            raise _Truncated
        yield number, wire, value


def records(data: bytes) -> tuple[list[bytes], list[str]]:
    """Payloads of the LevelDB log in `data`, and notes on what could not be read."""
    payloads, notes, _ = records_from(data, 0)
    return payloads, notes


def records_from(data: bytes, base: int) -> tuple[list[bytes], list[str], int]:
    """Payloads of the LevelDB log whose bytes from file offset `base` are `data`, notes, and the file
    offset just past the last whole record (where the next read resumes). `base` 0 checks the header;
    any other `base` must be such an offset, returned by an earlier read."""
    notes: list[str] = []
    if base == 0:
        if not data.startswith(HEADER):
            if len(data) < len(HEADER) and HEADER.startswith(data):
                return [], [], 0  # header still being written
            return [], ["not a wandb transaction log (header `:W&B` magic 0xBEE1 missing)"], 0
        base_pos = len(HEADER)
    else:
        base_pos = base
    out: list[bytes] = []
    pos = base_pos - base  # index into data
    done = base_pos  # file offset past the last whole (non-fragment) record
    pending: bytes | None = None
    while pos < len(data):
        left = BLOCK - (base + pos) % BLOCK
        if left < RECORD_HEADER:  # block trailer
            pos += left
            continue
        if len(data) - pos < RECORD_HEADER:
            notes.append(f"file ends inside a record header ({len(data) - pos} bytes): still being written?")
            break
        crc, length, kind = struct.unpack_from("<IHB", data, pos)
        if crc == 0 and length == 0 and kind == 0:  # zero padding (preallocated or trailer)
            pos += left  # `done` stays before it: a preallocated file gets records written here later
            continue
        body = data[pos + RECORD_HEADER : pos + RECORD_HEADER + length]
        if len(body) < length:
            notes.append(f"file ends inside a record ({len(body)} of {length} bytes): still being written?")
            break
        if zlib.crc32(body, zlib.crc32(bytes([kind]))) != crc:
            notes.append(f"checksum mismatch at byte {base + pos}; stopped reading")
            break
        pos += RECORD_HEADER + length
        if kind == FULL:
            out.append(body)
            pending = None
        elif kind == FIRST:
            pending = body
        elif kind in (MIDDLE, LAST) and pending is not None:
            pending += body
            if kind == LAST:
                out.append(pending)
                pending = None
        else:
            notes.append(f"unexpected record type {kind} at byte {base + pos}; stopped reading")
            break
        if pending is None:
            done = base + pos
    if pending is not None:
        notes.append("last record is incomplete (its LAST fragment is missing): still being written?")
    return out, notes, done


def _item_value(fields: dict[int, list]) -> float | None:
    """The numeric value of a HistoryItem (value_json, or the typed fields), else None."""
    if 16 in fields:
        try:
            value = json.loads(fields[16][-1].decode("utf-8", "replace"))
        except ValueError:
            return None
        return as_float(value) if isinstance(value, NUMBER) else None
    if 6 in fields and len(fields[6][-1]) == 8:
        return struct.unpack("<d", fields[6][-1])[0]
    if 5 in fields:
        raw = fields[5][-1]
        return float((raw >> 1) ^ -(raw & 1))  # zigzag sint64
    if 4 in fields:
        return float(bool(fields[4][-1]))
    return None


def _collect(data: bytes) -> dict[int, list]:
    out: dict[int, list] = {}
    for number, _, value in _fields(data):
        out.setdefault(number, []).append(value)
    return out


def _history(payload: bytes) -> tuple[dict[str, float], int | None]:
    values: dict[str, float] = {}
    step = None
    for number, wire, value in _fields(payload):
        if number == 1 and wire == 2:
            item = _collect(value)
            if 1 in item:
                key = item[1][-1].decode("utf-8", "replace")
            else:
                key = ".".join(part.decode("utf-8", "replace") for part in item.get(2, []))
            number_value = _item_value(item)
            if key and number_value is not None:
                values[key] = number_value
        elif number == 2 and wire == 2:
            step_fields = _collect(value)
            if 1 in step_fields:
                step = step_fields[1][-1]
    return values, step


def read_wandb_file(path: str | Path, step_key: str | None = None) -> ReadResult[MetricRow]:
    """History rows of a `.wandb` file. Step = `step_key` when given and present in the row (TRL and
    OpenRLHF: "train/global_step", since their `_step` is a call counter), else `_step` (verl: the global
    step). Row time = `_timestamp`. meta: `exit_code` once the run has ended."""
    result: ReadResult[MetricRow] = ReadResult()
    data = read_bytes(path, result)
    if data is None:
        return result
    payloads, result.notes = records(data)
    history_rows(payloads, step_key, result)
    return result


def history_rows(payloads: list[bytes], step_key: str | None, result: ReadResult[MetricRow]) -> None:
    """The history rows (and the exit code) of decoded records into `result`."""
    bad = 0
    for payload in payloads:
        try:
            top = _collect(payload)
            if 2 in top:
                values, history_step = _history(top[2][-1])
                step_value = values.get(step_key) if step_key else None
                if step_value is None or step_value != step_value:
                    step_value = values.get("_step", history_step)
                step = int(step_value) if step_value is not None and step_value == step_value else None
                result.rows.append(MetricRow(step=step, values=values, time=values.get("_timestamp")))
            elif 18 in top:
                exit_fields = _collect(top[18][-1])
                code = exit_fields.get(1, [0])[-1]
                result.meta["exit_code"] = code - (1 << 64) if code >= 1 << 63 else code  # int32 as varint
        except (ValueError, _Truncated, struct.error):
            bad += 1
    if bad:
        result.notes.append(f"{bad} record(s) could not be decoded")


def offline_runs(root: str | Path) -> list[Path]:
    """`run-<id>.wandb` files of `<root>/offline-run-*/` or `<root>/wandb/offline-run-*/`, oldest first."""
    root = Path(root)
    found = list(root.glob("offline-run-*/run-*.wandb")) + list(root.glob("wandb/offline-run-*/run-*.wandb"))
    return sorted(set(found), key=lambda p: p.parent.name)
