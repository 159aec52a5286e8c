"""TensorBoard scalar events -> (step, tag, value, wall_time) rows, every point kept (frameworks.md 5.1).

verl, TRL (TensorBoardCallback) and OpenRLHF write through torch's SummaryWriter, i.e. legacy
`simple_value` summaries, which EventAccumulator serves as scalars. Its default size_guidance keeps only
10,000 points per tag (reservoir sampling): `{"scalars": 0}` keeps all. Orphaned data is not purged
after a restart either, so a resumed run may repeat steps (last one wins if you need one per step).
Files are appended live (torch flushes every 120 s): a partly written record at the end gives a note.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from rlagent.tools import safefs
from rlagent.tools.frameworks.records import ReadResult
from rlagent.tools.safefs import open_regular

_MARKER = "tfevents"  # tensorboard io_wrapper.IsTensorFlowEventsFile
_SIZE_GUIDANCE = {"scalars": 0, "tensors": 1, "histograms": 1, "images": 1, "audio": 1, "compressedHistograms": 1}


@dataclass(frozen=True)
class ScalarRow:
    step: int
    tag: str
    value: float
    wall_time: float


def event_files(path: str | Path) -> list[Path]:
    """The event file itself, or the event files directly in a directory, in name (= time) order."""
    path = Path(path)
    if safefs.is_file(path):
        return [path]
    return sorted(p for p in safefs.list_dir(path) if _MARKER in p.name and safefs.is_file(p))


def run_dirs(root: str | Path) -> list[Path]:
    """Every directory under `root` (itself included) that holds event files: one TB run each."""
    root = Path(root)
    if not safefs.is_dir(root):
        return []
    dirs: set[Path] = set()
    for dirpath, _, filenames in os.walk(root, onerror=lambda _: None):  # no link followed: a loop cannot spin
        dirs.update(Path(dirpath) for name in filenames if _MARKER in name and safefs.is_file(Path(dirpath, name)))
    return sorted(dirs)


def incomplete_tail(path: str | Path) -> int:
    """Bytes at the end of a TFRecord file that do not make a whole record (0 when the file ends cleanly).
    A record is: uint64 length, uint32 masked crc, data, uint32 masked crc."""
    with open_regular(path) as handle:
        data = handle.read()
    pos = 0
    while pos < len(data):
        if len(data) - pos < 12:
            return len(data) - pos
        (length,) = struct.unpack_from("<Q", data, pos)
        end = pos + 12 + length + 4
        if end > len(data):
            return len(data) - pos
        pos = end
    return 0


def read_scalars(path: str | Path) -> ReadResult[ScalarRow]:
    """All scalar points of one run (an event file, or a directory of them), sorted by tag then step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    result: ReadResult[ScalarRow] = ReadResult()
    files = event_files(path)
    if not files:
        result.notes.append(f"no event files at {path}")
        return result
    for file in files:
        tail = incomplete_tail(file)
        if tail:
            result.notes.append(
                f"{file.name} ends with {tail} byte(s) that are not a whole record (being written, truncated or corrupt)"
            )
    accumulator = EventAccumulator(str(path), size_guidance=_SIZE_GUIDANCE, purge_orphaned_data=False)
    try:
        accumulator.Reload()
    except Exception as error:  # a corrupt file stops the loader; keep what it read before
        result.notes.append(f"reading stopped early: {type(error).__name__}: {error}")
    for tag in sorted(accumulator.Tags().get("scalars", [])):
        for event in accumulator.Scalars(tag):
            result.rows.append(ScalarRow(int(event.step), tag, float(event.value), float(event.wall_time)))
    return result


def by_step(rows: list[ScalarRow]) -> dict[int, dict[str, float]]:
    """step -> {tag: value} (a later point of the same step and tag wins, e.g. after a resume)."""
    out: dict[int, dict[str, float]] = {}
    for row in sorted(rows, key=lambda r: r.wall_time):
        out.setdefault(row.step, {})[row.tag] = row.value
    return dict(sorted(out.items()))
