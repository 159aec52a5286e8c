"""Reading a real log file incrementally: growth, half-written lines, rotation, truncation,
deletion, tracebacks, junk, and dates across midnight."""

import math
import os
from datetime import UTC, datetime, timedelta

from rlagent.tools.logread import read_log

from conftest import loguru_line, set_mtime

TZ = UTC


def orch_step(n: int, reward: float = 0.5) -> str:
    return (
        f"Step {n} |   41.2s | Reward {reward:.4f} | Trainable 112/128 (87.5%) | Turns 1.0 | Branches 1.0 | "
        f"Max Off-Policy 1 | Error 0.0% | Cancelled 0.0% | Truncation 3.1%"
    )


def write(path, text, mtime=None):
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
    set_mtime(path, mtime or datetime(2026, 11, 20, 23, 59, 59, tzinfo=UTC))


def test_growing_file_is_read_once_and_half_written_line_waits(tmp_path):
    log = tmp_path / "orchestrator.log"
    write(log, loguru_line("14:00:00", "INFO", "Starting orchestrator") + loguru_line("14:01:00", "SUCCESS", orch_step(1)))
    first = read_log(log, "logs/orchestrator.log", None, TZ)
    assert [s.step for s, _ in first.steps] == [1]
    assert first.cursor.offset == log.stat().st_size and first.cursor.lines == 2

    # A complete step line and a half-written one (the process is mid-write).
    full = loguru_line("14:02:00", "SUCCESS", orch_step(2, 0.6))
    half = loguru_line("14:03:00", "SUCCESS", orch_step(3, 0.7))
    write(log, full + half[:40])
    second = read_log(log, "logs/orchestrator.log", first.cursor, TZ)
    assert [s.step for s, _ in second.steps] == [2]
    assert second.cursor.offset == log.stat().st_size - 40
    assert second.cursor.lines == 3

    write(log, half[40:])
    third = read_log(log, "logs/orchestrator.log", second.cursor, TZ)
    assert [(s.step, s.values["reward"]) for s, _ in third.steps] == [(3, 0.7)]
    assert third.cursor.lines == 4 and not third.notes


def test_truncated_file_is_reread_from_start_with_a_note(tmp_path):
    log = tmp_path / "trainer.log"
    write(log, "".join(loguru_line(f"10:00:0{i}", "SUCCESS", orch_step(i)) for i in range(1, 6)))
    first = read_log(log, "logs/trainer.log", None, TZ)
    log.write_text(loguru_line("11:00:00", "SUCCESS", orch_step(1)))
    set_mtime(log, datetime(2026, 11, 20, 11, 0, 1, tzinfo=UTC))
    second = read_log(log, "logs/trainer.log", first.cursor, TZ)
    assert second.fresh and any("shrank" in n for n in second.notes)
    assert [s.step for s, _ in second.steps] == [1]


def test_rotated_file_is_noticed(tmp_path):
    log = tmp_path / "orchestrator.log"
    write(log, loguru_line("10:00:00", "SUCCESS", orch_step(1)))
    first = read_log(log, "logs/orchestrator.log", None, TZ)
    os.rename(log, tmp_path / "orchestrator.log.1")
    write(log, loguru_line("10:05:00", "SUCCESS", orch_step(2)) + loguru_line("10:06:00", "SUCCESS", orch_step(3)))
    second = read_log(log, "logs/orchestrator.log", first.cursor, TZ)
    assert any("replaced (rotated)" in n for n in second.notes)
    assert [s.step for s, _ in second.steps] == [2, 3]


def test_deleted_file_gives_a_note_and_no_cursor(tmp_path):
    log = tmp_path / "orchestrator.log"
    write(log, loguru_line("10:00:00", "SUCCESS", orch_step(1)))
    first = read_log(log, "logs/orchestrator.log", None, TZ)
    log.unlink()
    second = read_log(log, "logs/orchestrator.log", first.cursor, TZ)
    assert second.cursor is None and second.notes == ["logs/orchestrator.log was deleted since the last check-in"]


def test_traceback_is_attached_and_classified_with_file_and_line(tmp_path):
    log = tmp_path / "trainer.log"
    text = (
        loguru_line("14:00:00", "SUCCESS", "Step 1 |   38.9s | Loss 0.0012 | Entropy 0.4410", prefix="[trainer0]:")
        + loguru_line(
            "14:09:44",
            "ERROR",
            "Fatal error in train\nTraceback (most recent call last):\n"
            '  File "train.py", line 9, in train\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB',
            prefix="[trainer0]:",
        )
        + "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    )
    write(log, text)
    read = read_log(log, "logs/trainer.log", None, TZ)
    kinds = {(e.kind, e.line) for e in read.events}
    assert ("crash", 2) in kinds and ("cuda_oom", 5) in kinds
    crash = next(e for e in read.events if e.kind == "crash" and e.line == 2)
    assert crash.step == 1 and "CUDA out of memory" in crash.detail
    assert crash.cite() == "logs/trainer.log:2: Fatal error in train"
    assert crash.time == datetime(2026, 11, 20, 14, 9, 44, tzinfo=UTC)
    assert "ChildFailedError" in crash.detail
    assert [(g.template, g.first.line, g.count) for g in read.groups.values()] == [("Fatal error in train", 2, 1)]


def test_a_thousand_identical_warnings_are_one_group_and_events_stay_bounded(tmp_path):
    log = tmp_path / "orchestrator.log"
    write(
        log,
        "".join(
            loguru_line("14:00:00", "WARNING", f"Trace failed in group {i:08x} (env) — TimeoutError: {i}s") for i in range(1000)
        ),
    )
    read = read_log(log, "logs/orchestrator.log", None, TZ, keep_per_kind=20)
    (group,) = read.groups.values()
    assert group.template == "Trace failed in group <id> (env) — TimeoutError: <n>s"
    assert (group.count, group.first.line, group.last.line) == (1000, 1, 1000)
    assert [e.line for e in read.events] == list(range(981, 1001))


def test_headless_crash_lines_after_a_step_line_are_still_witnesses(tmp_path):
    log = tmp_path / "trainer.log"
    write(
        log,
        loguru_line("14:00:00", "SUCCESS", "Step 1 |   38.9s | Loss 0.0012 | Entropy 0.4410", prefix="[trainer0]:")
        + "[trainer0]:[rank0]:[E1120 14:00:30.1] [PG 0 Rank 0] Watchdog caught collective operation timeout: NCCL\n"
        + "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n",
    )
    read = read_log(log, "logs/trainer.log", None, TZ)
    assert [(e.kind, e.line, e.level) for e in read.events] == [("nccl", 2, "STDERR"), ("crash", 3, "STDERR")]


def test_multi_env_sublines_belong_to_their_step_line(tmp_path):
    log = tmp_path / "orchestrator.log"
    write(
        log,
        loguru_line(
            "14:00:00",
            "SUCCESS",
            orch_step(4) + "\n\t\t ╰─ reverse-text | Ratio 0.5 | Reward 0.3\n\t\t ╰─ math | Ratio 0.5 | Reward 0.7",
        ),
    )
    read = read_log(log, "logs/orchestrator.log", None, TZ)
    assert [(s.step, s.values["reward"]) for s, _ in read.steps] == [(4, 0.5)]
    assert read.cursor.lines == 3


def test_nan_and_inf_in_trainer_line(tmp_path):
    log = tmp_path / "trainer.log"
    write(
        log,
        loguru_line(
            "14:00:00",
            "SUCCESS",
            "Step 9 |   38.9s | Loss nan | Entropy 0.44 | Grad. Norm inf | LR 3.00e-06",
            prefix="[trainer0]:",
        ),
    )
    ((step, _),) = read_log(log, "logs/trainer.log", None, TZ).steps
    assert math.isnan(step.values["loss"]) and math.isinf(step.values["grad_norm"])


def test_binary_junk_and_a_one_megabyte_line_do_not_break_reading(tmp_path):
    log = tmp_path / "orchestrator.log"
    big = "x" * (1 << 20)
    with open(log, "wb") as f:
        f.write(loguru_line("14:00:00", "SUCCESS", orch_step(1)).encode())
        f.write(b"\x00\xff\xfe WARNING junk \x00\n")
        f.write(loguru_line("14:00:05", "WARNING", "Trace failed in group ab12cd (env) — TimeoutError: " + big).encode())
        f.write(loguru_line("14:01:00", "SUCCESS", orch_step(2)).encode())
    set_mtime(log, datetime(2026, 11, 20, 14, 1, 1, tzinfo=UTC))
    read = read_log(log, "logs/orchestrator.log", None, TZ)
    assert [s.step for s, _ in read.steps] == [1, 2]
    assert any("binary junk" in n for n in read.notes)
    assert any("over-long" in n for n in read.notes)
    (event,) = [e for e in read.events if e.kind == "env_error"]
    assert event.line == 3 and len(event.message) <= 500


def test_junk_between_two_info_lines_is_noted(tmp_path):
    log = tmp_path / "orchestrator.log"
    with open(log, "wb") as f:
        f.write(loguru_line("14:00:00", "INFO", "Train batch 96/128 (75.0%)").encode())
        f.write(b"\xff\xfe\x80garbage\n\x00\x00\x00\n")
        f.write(loguru_line("14:00:10", "INFO", "Train batch 128/128 (100.0%)").encode())
    set_mtime(log, datetime(2026, 11, 20, 14, 0, 11, tzinfo=UTC))
    read = read_log(log, "logs/orchestrator.log", None, TZ)
    assert read.notes == ["logs/orchestrator.log: 2 line(s) of binary junk (NUL bytes or invalid UTF-8), not quoted"]
    assert read.cursor.lines == 4


def test_dates_cross_midnight_from_the_file_time(tmp_path):
    log = tmp_path / "orchestrator.log"
    lines = [("23:58:00", 1), ("23:59:30", 2), ("00:01:00", 3), ("00:02:30", 4)]
    write(
        log,
        "".join(loguru_line(t, "SUCCESS", orch_step(n)) for t, n in lines),
        mtime=datetime(2026, 11, 21, 0, 2, 31, tzinfo=UTC),
    )
    read = read_log(log, "logs/orchestrator.log", None, TZ)
    dates = [when for _, when in read.steps]
    assert dates[0] == datetime(2026, 11, 20, 23, 58, tzinfo=UTC)
    assert dates[3] == datetime(2026, 11, 21, 0, 2, 30, tzinfo=UTC)
    # The next read continues from the last date, across another midnight a day later.
    write(
        log,
        loguru_line("23:59:00", "SUCCESS", orch_step(5)) + loguru_line("00:00:10", "SUCCESS", orch_step(6)),
        mtime=datetime(2026, 11, 22, 0, 0, 11, tzinfo=UTC),
    )
    later = read_log(log, "logs/orchestrator.log", read.cursor, TZ)
    assert [when for _, when in later.steps] == [
        datetime(2026, 11, 21, 23, 59, tzinfo=UTC),
        datetime(2026, 11, 22, 0, 0, 10, tzinfo=UTC),
    ]
    assert later.cursor.last_time - read.cursor.last_time > timedelta(hours=23)


def test_local_time_zone_of_the_logs_is_converted_to_utc(tmp_path):
    from zoneinfo import ZoneInfo

    log = tmp_path / "orchestrator.log"
    write(log, loguru_line("09:00:00", "SUCCESS", orch_step(1)), mtime=datetime(2026, 11, 20, 14, 0, 1, tzinfo=UTC))
    ((_, when),) = read_log(log, "logs/orchestrator.log", None, ZoneInfo("America/New_York")).steps
    assert when == datetime(2026, 11, 20, 14, 0, tzinfo=UTC)


def _summary(read):
    return (
        [(s.process, s.step, s.values, when) for s, when in read.steps],
        [(e.line, e.kind, e.time, e.message) for e in read.events],
        {t: (g.count, g.first.line, g.first.time, g.last.line, g.last.time) for t, g in read.groups.items()},
        read.step_counts,
        (read.cursor.offset, read.cursor.lines, read.cursor.last_time, read.cursor.step),
    )


def test_a_read_taken_a_chunk_at_a_time_dates_and_keeps_what_one_buffer_does(tmp_path, monkeypatch):
    """The scanner hands read_log its candidate lines a buffer at a time and read_log keeps none of
    them (100,000 step lines held at once were 100 MB); the dates, which a first read anchors at the
    file's end, come out the same as from one buffer, across three midnights and junk times."""
    from rlagent.tools import logscan

    log = tmp_path / "orchestrator.log"
    records, clock = [], datetime(2026, 11, 18, 22, 0, tzinfo=UTC)
    for n in range(1, 1601):
        clock += timedelta(seconds=151)
        stamp = clock.strftime("%H:%M:%S") if n % 97 else "99:99:99"  # a junk time now and then
        records.append(loguru_line(stamp, "SUCCESS", orch_step(n, reward=n / 1600)))
        if n % 50 == 0:
            records.append(loguru_line(stamp, "WARNING", f"Env server slow: {n} ms"))
    write(log, "".join(records), mtime=clock + timedelta(seconds=1))

    whole = read_log(log, "logs/orchestrator.log", None, TZ)
    monkeypatch.setattr(logscan, "CHUNK", 4096)  # ~100 buffers
    chunked = read_log(log, "logs/orchestrator.log", None, TZ)
    assert _summary(chunked) == _summary(whole)
    dates = [when for _, when in chunked.steps]
    assert dates[-1] == clock.replace(microsecond=0) and dates[1] == datetime(2026, 11, 18, 22, 5, 2, tzinfo=UTC)
    assert dates[96] == dates[95]  # a junk time takes the real one before it

    # grown and read on from the cursor, a chunk at a time, it still dates on from the last line
    later_clock = [clock + timedelta(minutes=k) for k in (1, 2)]
    more = "".join(loguru_line(t.strftime("%H:%M:%S"), "SUCCESS", orch_step(1600 + i)) for i, t in enumerate(later_clock, 1))
    write(log, more, mtime=clock + timedelta(minutes=2, seconds=1))
    later = read_log(log, "logs/orchestrator.log", chunked.cursor, TZ)
    assert [when for _, when in later.steps] == [clock.replace(microsecond=0) + timedelta(minutes=k) for k in (1, 2)]


def _tod(text: str) -> int:
    h, m, s = map(int, text.split(":"))
    return h * 3600 + m * 60 + s


def _ts(*args) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


def test_a_copied_runs_files_share_one_anchor_at_the_end_of_their_stretch():
    from rlagent.tools.dayclock import shared_anchor

    copied = _ts(2026, 11, 27, 10, 30)  # every mtime: the copy's
    newest = [(_tod(t), copied) for t in ("09:15:06", "10:05:48", "10:36:36", "10:38:18")]
    assert shared_anchor(newest, UTC) == _ts(2026, 11, 26, 10, 38, 18)
    # a stretch across midnight ends after it: 00:10 of the copy's day, 23:50 the day before
    across = [(_tod("23:50:00"), _ts(2026, 11, 27, 15)), (_tod("00:10:00"), _ts(2026, 11, 27, 15))]
    assert shared_anchor(across, UTC) == _ts(2026, 11, 27, 0, 10)
    assert shared_anchor(newest[:1], UTC) is None  # one file: its own mtime anchors it as before


def test_files_last_written_when_their_newest_line_says_keep_their_own_dates():
    from rlagent.tools.dayclock import shared_anchor

    # a live run: its trainer died at 10:38 yesterday (mtime then), its orchestrator logs now:
    # the trainer is a day behind, as its mtime says
    live = [(_tod("10:38:18"), _ts(2026, 11, 26, 10, 38, 18)), (_tod("10:05:00"), _ts(2026, 11, 27, 10, 5, 1))]
    assert shared_anchor(live, UTC) is None
    # one file written within 2 minutes of its newest line is enough (a clock 1 minute ahead here)
    ahead = [(_tod("10:38:18"), _ts(2026, 11, 27, 10, 37, 30)), (_tod("09:00:00"), _ts(2026, 11, 27, 10, 37, 30))]
    assert shared_anchor(ahead, UTC) is None
