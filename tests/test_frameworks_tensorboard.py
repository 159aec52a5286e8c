"""tensorboard.py: a real event file written with tensorboard's own writer, every point kept, truncation."""

from __future__ import annotations

import math

import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from rlagent.tools.frameworks.tensorboard import by_step, event_files, incomplete_tail, read_scalars, run_dirs

POINTS = 12_000  # more than EventAccumulator's default reservoir of 10,000 per tag


def scalar_event(step: int, tag: str, value: float) -> event_pb2.Event:
    # what torch's SummaryWriter.add_scalar writes: a legacy simple_value summary
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
    return event_pb2.Event(wall_time=1_700_000_000.0 + step, step=step, summary=summary)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tb") / "tensorboard_log" / "proj" / "exp"
    writer = EventFileWriter(str(directory))
    for step in range(1, POINTS + 1):
        writer.add_event(scalar_event(step, "critic/score/mean", step / POINTS))
        if step % 100 == 0:
            writer.add_event(scalar_event(step, "timing_s/step", math.nan if step == 500 else 80.0))
    writer.close()
    return directory


def test_every_point_is_kept(run_dir):
    result = read_scalars(run_dir)
    assert result.notes == []
    score = [row for row in result.rows if row.tag == "critic/score/mean"]
    assert len(score) == POINTS
    assert [row.step for row in score] == list(range(1, POINTS + 1))
    assert score[-1].value == pytest.approx(1.0) and score[0].wall_time == 1_700_000_001.0
    timing = [row for row in result.rows if row.tag == "timing_s/step"]
    assert len(timing) == POINTS // 100 and math.isnan(timing[4].value)


def test_single_file_and_by_step(run_dir):
    (path,) = event_files(run_dir)
    assert "tfevents" in path.name
    rows = read_scalars(path).rows
    steps = by_step(rows)
    assert steps[200] == {"critic/score/mean": pytest.approx(200 / POINTS), "timing_s/step": 80.0}


def test_truncated_copy_gives_what_was_readable_and_a_note(run_dir, tmp_path):
    (path,) = event_files(run_dir)
    data = path.read_bytes()
    copy = tmp_path / "trunc" / path.name
    copy.parent.mkdir()
    copy.write_bytes(data[:-30])
    assert incomplete_tail(copy) > 0 and incomplete_tail(path) == 0
    result = read_scalars(copy.parent)
    # only the last, partly written record (timing_s/step at step 12,000) is lost
    assert len([row for row in result.rows if row.tag == "critic/score/mean"]) == POINTS
    assert len([row for row in result.rows if row.tag == "timing_s/step"]) == POINTS // 100 - 1
    assert len(result.notes) == 1 and "not a whole record" in result.notes[0]
    # cut in the middle: still no exception, the first half is there
    copy.write_bytes(data[: len(data) // 2])
    half = read_scalars(copy.parent)
    assert 0 < len(half.rows) < POINTS and half.notes


def test_junk_empty_and_missing(tmp_path):
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "events.out.tfevents.1700000000.host.1.0").write_bytes(bytes(range(256)) * 20)
    result = read_scalars(junk)
    assert result.rows == [] and result.notes
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "events.out.tfevents.1700000000.host.2.0").write_bytes(b"")
    assert read_scalars(empty).rows == []
    assert read_scalars(tmp_path / "missing").notes == [f"no event files at {tmp_path / 'missing'}"]


def test_run_dirs(run_dir):
    root = run_dir.parent.parent.parent
    assert run_dirs(root) == [run_dir]
