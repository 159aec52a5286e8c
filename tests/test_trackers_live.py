"""Tracker files read live (tools/adapters/trackers.py): real TensorBoard event files written by
tensorboard's own EventFileWriter, `.wandb` files in wandb's framing (tests/wandbkit.py, checked against
wandb's bytes), W&B CSV exports. Each file grows between reads, cut anywhere, as a live run's does."""

from __future__ import annotations

import math
import shutil
from datetime import UTC
from pathlib import Path

import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from rlagent.tools.adapters import adapter_for, discover
from rlagent.tools.adapters.trackers import MAX_RECORD, read_trackers, tracker_files

from wandbkit import frame, history_record

FIXTURES = Path(__file__).resolve().parents[1] / "evals" / "fixtures"


def scalar_event(step: int, tag: str, value: float) -> event_pb2.Event:
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
    return event_pb2.Event(wall_time=1_700_000_000.0 + step, step=step, summary=summary)


def write_events(directory: Path, steps: range) -> Path:
    """verl's tags, as torch's SummaryWriter writes them (legacy simple_value summaries)."""
    writer = EventFileWriter(str(directory))
    for step in steps:
        writer.add_event(scalar_event(step, "critic/score/mean", step / 100))
        writer.add_event(scalar_event(step, "actor/entropy", math.nan if step == 7 else 1.0 - step / 100))
    writer.close()
    return next(directory.glob("*tfevents*"))


def points(reads) -> list[tuple[int, str]]:
    """Every (step, metric) read, repeats kept: a record read twice shows up twice."""
    return sorted((row.step, name) for read in reads for row in read.rows for name in row.values)


def rows_by_step(reads) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    for read in reads:
        for row in read.rows:
            out.setdefault(row.step, {}).update(row.values)
    return out


def test_event_file_is_read_record_by_record_as_it_grows(tmp_path):
    source = write_events(tmp_path / "src", range(1, 41))
    full = source.read_bytes()
    run_dir = tmp_path / "run"
    live = run_dir / "tensorboard_log" / "proj" / "exp" / source.name
    live.parent.mkdir(parents=True)
    whole = rows_by_step(read_trackers(_copy_of(source, tmp_path / "whole"), "verl", {}))
    assert sorted(whole) == list(range(1, 41))
    assert whole[3]["reward"] == pytest.approx(0.03) and math.isnan(whole[7]["entropy"])

    cut = len(full) // 2 + 5  # inside a record, on purpose
    live.write_bytes(full[:cut])
    [first] = read_trackers(run_dir, "verl", {})
    assert first.fresh and first.cursor is not None and first.notes == []
    assert 0 < first.cursor.offset <= cut  # the half-written record waits
    with open(live, "ab") as handle:
        handle.write(full[cut:])
    [second] = read_trackers(run_dir, "verl", {first.rel: first.cursor})
    assert not second.fresh and second.bytes_read == len(full) - first.cursor.offset
    assert second.cursor.offset == len(full)
    assert points([first, second]) == points(read_trackers(run_dir, "verl", {}))  # each record read once
    [third] = read_trackers(run_dir, "verl", {second.rel: second.cursor})
    assert third.rows == [] and third.bytes_read == 0


def test_an_event_file_read_past_its_budget_is_caught_up_oldest_first_saying_it_is_behind(tmp_path, monkeypatch):
    from rlagent.tools.adapters import lineblocks, trackers

    run_dir = _copy_of(write_events(tmp_path / "src", range(1, 401)), tmp_path / "run")
    size = next(run_dir.glob("tb/*tfevents*")).stat().st_size
    monkeypatch.setattr(trackers, "CHUNK", size // 3)
    whole = read_trackers(run_dir, "verl", {})  # in chunks, within its budget
    assert not whole[0].notes and not whole[0].behind and whole[0].cursor.offset == size
    monkeypatch.setattr(lineblocks, "READ_BUDGET_S", 0.0)  # spent once the first chunk is read
    cursors: dict = {}
    reads = []
    while not reads or reads[-1].cursor.offset < size:
        [read] = read_trackers(run_dir, "verl", cursors)
        cursors[read.rel] = read.cursor
        reads.append(read)
        behind = [n for n in read.notes if "behind the run" in n]
        assert len(behind) == read.behind == (read.cursor.offset < size), read.notes
    assert len(reads) == 4  # a third at a time, and the half record each cut leaves
    assert sorted(rows_by_step(reads)) == list(range(1, 401))
    assert points(reads) == points(whole)  # each record once


def test_an_event_file_is_read_a_chunk_at_a_time_its_steps_held_bounded(tmp_path, monkeypatch):
    """3,000 steps read in chunks that cut records anywhere give the newest KEEP_STEPS steps and the early
    values as written, holding fewer steps than the file has; one whole chunk gives the same."""
    import numpy as np

    from rlagent.tools.adapters import trackers
    from rlagent.tools.steprows import EARLY_VALUES, KEEP_STEPS

    run_dir = _copy_of(write_events(tmp_path / "src", range(1, 3001)), tmp_path / "run")
    written = {
        s: {"reward": float(np.float32(s / 100)), "entropy": math.nan if s == 7 else float(np.float32(1.0 - s / 100))}
        for s in range(1, 3001)
    }
    monkeypatch.setattr(trackers, "CHUNK", 1 << 30)
    whole = rows_by_step(read_trackers(run_dir, "verl", {}))
    monkeypatch.setattr(trackers, "CHUNK", 1000)  # records are ~50 bytes: many cut between chunks
    [read] = read_trackers(run_dir, "verl", {})
    parts = rows_by_step([read])
    assert read.cursor.offset == next(run_dir.glob("tb/*tfevents*")).stat().st_size
    assert KEEP_STEPS <= len(parts) < 3000 and parts.keys() == whole.keys()
    newest, early = sorted(parts)[-KEEP_STEPS:], sorted(parts)[:EARLY_VALUES]
    assert newest == list(range(3001 - KEEP_STEPS, 3001)) and early == list(range(1, EARLY_VALUES + 1))
    assert all(_same(parts[s], written[s]) and _same(whole[s], written[s]) for s in newest + early)


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]) for k in a)


def _copy_of(source: Path, run_dir: Path) -> Path:
    (run_dir / "tb").mkdir(parents=True)
    shutil.copy(source, run_dir / "tb" / source.name)
    return run_dir


def test_a_corrupt_event_file_is_a_note(tmp_path):
    source = write_events(tmp_path / "src", range(1, 4))
    run_dir = tmp_path / "run"
    bad = run_dir / "runs" / source.name
    bad.parent.mkdir(parents=True)
    data = source.read_bytes()
    bad.write_bytes(data + (MAX_RECORD + 1).to_bytes(8, "little") + b"\x00" * 20)
    [read] = read_trackers(run_dir, "trl", {})
    assert any("stopped reading (corrupt file)" in note for note in read.notes)
    assert read.cursor is not None and read.cursor.offset == len(data)
    bad.write_bytes(b"\x00\xff" * 5000)  # binary junk from the first byte
    [junk] = read_trackers(run_dir, "trl", {})
    assert junk.rows == [] and junk.notes


def _wandb_payloads() -> list[bytes]:
    big = {f"train/rewards/fn_{i}/mean": str(i / 1000) for i in range(2500)}  # one record over 32 KiB
    payloads = [
        history_record(10 + s, {"_step": str(s * 3), "train/global_step": str(s), "train/reward": str(s / 10)}, s * 3)
        for s in range(1, 300)
    ]
    payloads.insert(150, history_record(5000, {"_step": "9999", "train/global_step": "150", **big}, 9999))
    return payloads


@pytest.mark.parametrize("cut_at", ["mid_header", "mid_fragment", "block_edge"])
def test_a_wandb_run_is_read_as_wandb_writes_it(tmp_path, cut_at):
    """TRL: the step is `train/global_step` (wandb's `_step` counts log calls); a cut anywhere waits."""
    full = frame(_wandb_payloads())
    run_dir = tmp_path / "run"
    live = run_dir / "wandb" / "offline-run-20261123_120000-abc" / "run-abc.wandb"
    live.parent.mkdir(parents=True)
    cut = {"mid_header": 3, "mid_fragment": 32 * 1024 + 100, "block_edge": 2 * 32 * 1024}[cut_at]
    live.write_bytes(full[:cut])
    [first] = read_trackers(run_dir, "trl", {})
    assert first.notes == [] and first.cursor is not None and first.cursor.offset <= cut
    with open(live, "ab") as handle:
        handle.write(full[cut:])
    [second] = read_trackers(run_dir, "trl", {first.rel: first.cursor})
    assert second.notes == [] and second.cursor.offset == len(full)
    steps = rows_by_step([first, second])
    assert sorted(steps) == list(range(1, 300))  # global steps, not `_step`
    assert steps[42]["reward"] == pytest.approx(4.2)
    assert points([first, second]) == points(read_trackers(run_dir, "trl", {}))  # each record read once


def test_a_wandb_export_csv_is_read_and_other_csvs_are_not(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "export.csv").write_text(
        "Step,grpo-7b - train/reward,grpo-7b - train/reward__MIN,grpo-7b - train/reward__MAX\n"
        "1,0.1,0.0,0.2\n2,0.15,,\n3,,0.1,0.3\n"
    )
    (run_dir / "prompts.csv").write_text("question,answer\n1+1,2\n")
    [read] = read_trackers(run_dir, "trl", {})
    assert read.rel == "export.csv"
    assert rows_by_step([read]) == {1: {"reward": 0.1}, 2: {"reward": 0.15}}
    [again] = read_trackers(run_dir, "trl", {read.rel: read.cursor})
    assert again.rows == []  # unchanged: not read again


def test_tracker_files_are_found_where_each_framework_writes_them(tmp_path):
    run_dir = tmp_path / "run"
    paths = [
        "tensorboard_log/proj/exp/events.out.tfevents.1.host",  # verl
        "out/runs/Nov23_12-00-00_host/events.out.tfevents.2.host",  # TRL
        "wandb/offline-run-20261123_120000-abc/run-abc.wandb",
        "wandb/run-20261123_120000-def/run-def.wandb",  # an online run keeps its .wandb too
        "checkpoints/global_step_10/actor/events.out.tfevents.3.host",  # inside a checkpoint: not a source
    ]
    for rel in paths:
        (run_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / rel).write_bytes(b"")
    found = {str(p.relative_to(run_dir)) for p in tracker_files(run_dir)}
    assert found == set(paths[:4])


def test_a_verl_run_logging_to_tensorboard_is_judged_on_it(tmp_path):
    """The console and the event file both feed the run's history (a step only TensorBoard saw too)."""
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURES / "84_verl-healthy" / "run", run_dir)
    write_events(run_dir / "tensorboard_log" / "proj" / "exp", range(900, 903))
    info = discover(run_dir)
    read = adapter_for(info.framework).read(info, {}, UTC)
    tb = [f for f in read.files if "tfevents" in f.rel]
    assert len(tb) == 1 and {row.step for row in tb[0].rows} == {900, 901, 902}
    assert any(f.rel.endswith(".log") and f.rows for f in read.files)


def test_a_long_wandb_run_is_decoded_a_batch_at_a_time_its_steps_held_bounded(tmp_path, monkeypatch):
    from rlagent.tools.adapters import trackers
    from rlagent.tools.steprows import EARLY_VALUES, KEEP_STEPS

    payloads = [
        history_record(10 + s, {"_step": str(s), "train/global_step": str(s), "train/reward": str(s / 10)}, s)
        for s in range(1, 3001)
    ]
    for at in (7, 2500):  # two that cannot be decoded, in different batches: one note says both
        payloads.insert(at, b"\x12\x03not a history record")
    live = tmp_path / "run" / "wandb" / "offline-run-20261123_120000-abc" / "run-abc.wandb"
    live.parent.mkdir(parents=True)
    live.write_bytes(frame(payloads))
    monkeypatch.setattr(trackers, "_BATCH", 100)
    [read] = read_trackers(tmp_path / "run", "trl", {})
    steps = rows_by_step([read])
    assert KEEP_STEPS <= len(steps) < 3000 and read.cursor.offset == live.stat().st_size
    newest, early = sorted(steps)[-KEEP_STEPS:], sorted(steps)[:EARLY_VALUES]
    assert newest == list(range(3001 - KEEP_STEPS, 3001)) and early == list(range(1, EARLY_VALUES + 1))
    assert all(steps[s]["reward"] == pytest.approx(s / 10) for s in newest + early)
    assert read.notes == [f"{read.rel}: 2 record(s) could not be decoded"]


def test_a_wandb_run_longer_than_one_piece_is_read_whole_or_caught_up_each_record_once(tmp_path, monkeypatch):
    """A `.wandb` file is split into records MAX_READ at a time, each piece from the end of the last
    whole record: all of it in one check-in within the budget, else over several, saying it is behind."""
    from rlagent.tools.adapters import lineblocks, trackers

    payloads = [
        history_record(10 + s, {"_step": str(s), "train/global_step": str(s), "train/reward": str(s / 10)}, s)
        for s in range(1, 601)
    ]
    live = tmp_path / "run" / "wandb" / "offline-run-20261123_120000-abc" / "run-abc.wandb"
    live.parent.mkdir(parents=True)
    live.write_bytes(frame(payloads))
    size = live.stat().st_size
    monkeypatch.setattr(trackers, "MAX_READ", size // 5 + 7)  # pieces end inside records
    [read] = read_trackers(tmp_path / "run", "trl", {})
    assert read.cursor.offset == size and not read.notes and not read.behind
    assert sorted(rows_by_step([read])) == list(range(1, 601))

    monkeypatch.setattr(lineblocks, "READ_BUDGET_S", 0.0)
    cursors: dict = {}
    reads = []
    while not reads or reads[-1].cursor.offset < size:
        [read] = read_trackers(tmp_path / "run", "trl", cursors)
        cursors[read.rel] = read.cursor
        reads.append(read)
        behind = [n for n in read.notes if "behind the run" in n]
        assert len(behind) == read.behind == (read.cursor.offset < size), read.notes
    assert len(reads) >= 5
    steps = [row.step for r in reads for row in r.rows if row.process == "orchestrator"]
    assert sorted(steps) == sorted(set(steps)) == list(range(1, 601))  # each record once


@pytest.mark.parametrize("kind", ["wandb", "tfevents"])
def test_a_tracker_file_swapped_for_a_fifo_after_it_was_planned_is_a_note_not_a_hang(tmp_path, monkeypatch, kind):
    """The read opens the file it planned without blocking (safefs.open_regular): a FIFO there now,
    which an `open` would wait on forever for a writer, is refused."""
    import os

    from rlagent.tools.adapters import lineblocks

    from faultkit import bounded

    if kind == "wandb":
        live = tmp_path / "run" / "wandb" / "offline-run-20261123_120000-abc" / "run-abc.wandb"
        live.parent.mkdir(parents=True)
        live.write_bytes(frame([history_record(11, {"_step": "1", "train/global_step": "1", "train/reward": "0.1"}, 1)]))
    else:
        live = next(_copy_of(write_events(tmp_path / "src", range(1, 11)), tmp_path / "run").glob("tb/*tfevents*"))
    planned = lineblocks.read_deadline

    def swap_then_plan() -> float:
        live.unlink()
        os.mkfifo(live)
        return planned()

    monkeypatch.setattr(lineblocks, "read_deadline", swap_then_plan)
    with bounded(10, "a tracker read"):
        [read] = read_trackers(tmp_path / "run", "trl", {})
    assert not read.rows and any("unreadable" in n and "FIFO" in n for n in read.notes), read.notes
