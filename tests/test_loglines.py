"""Parsing single prime-rl log lines of both layouts (prime-rl-formats.md sections 1-2)."""

import math

from rlagent.tools.loglines import clean, parse_head
from rlagent.tools.steplines import parse_duration, parse_eval_line, parse_step_line

from conftest import loguru_line

H_ORCH = (
    "Step 3 |   41.2s | Reward 0.4312 | Trainable 112/128 (87.5%) | Turns 1.0 | Branches 1.0 | "
    "Max Off-Policy 1 | Error 0.0% | Cancelled 0.0% | Truncation 3.1%"
)
H_TRAINER = (
    "Step 3 |   38.9s | Loss 0.0012 | Entropy 0.4410 | Mismatch KL 0.0008 | Grad. Norm 0.2143 | LR 3.00e-06 | "
    "Throughput 10432 tokens/s | MFU 12.1% | Peak Mem. 31.7 GiB"
)


def test_loguru_line_with_ansi_and_trainer_prefix():
    raw = loguru_line("14:06:01", "SUCCESS", H_TRAINER, prefix="[trainer0]:").encode()
    head = parse_head(clean(raw))
    assert head is not None
    assert (head.seconds, head.level) == (14 * 3600 + 6 * 60 + 1, "SUCCESS")
    assert head.message == H_TRAINER


def test_levels_are_right_aligned_and_all_parse():
    for level in ("INFO", "SUCCESS", "WARNING", "ERROR", "DEBUG"):
        head = parse_head(clean(loguru_line("00:00:09", level, "hello — ╰─ world").encode()))
        assert head is not None and head.level == level and head.message == "hello — ╰─ world"


def test_continuation_and_foreign_lines_are_not_heads():
    assert parse_head("Traceback (most recent call last):") is None
    assert parse_head("\t\t ╰─ reverse-text | Ratio 0.5 | Reward 0.4") is None
    assert parse_head('INFO:     127.0.0.1:53422 - "POST /v1/chat/completions HTTP/1.1" 200 OK') is None


def test_vllm_and_json_lines():
    head = parse_head("(APIServer pid=12) ERROR 11-22 14:05:12 [engine.py:123] CUDA out of memory")
    assert head is not None and head.level == "ERROR" and head.message == "CUDA out of memory"
    head = parse_head('{"timestamp": "2026-11-22T14:05:12.1+00:00", "level": "WARNING", "message": "x", "module": "m"}')
    assert head is not None and head.level == "WARNING" and head.seconds == 14 * 3600 + 5 * 60 + 12


def test_binary_junk_decodes_without_error():
    text = clean(b"\xff\xfe\x1b[2m14:00:00\x1b[0m junk \xc3")
    assert "\ufffd" in text


def test_h_orchestrator_step_line():
    line = parse_step_line(H_ORCH)
    assert line is not None and line.process == "orchestrator" and line.step == 3
    assert line.values == {
        "step_time": 41.2,
        "reward": 0.4312,
        "trainable": 0.875,
        "turns": 1.0,
        "branches": 1.0,
        "off_policy_max": 1.0,
        "error": 0.0,
        "cancelled": 0.0,
        "truncation": 0.031,
    }


def test_h_trainer_step_line_with_nan_and_inf():
    line = parse_step_line(H_TRAINER.replace("Loss 0.0012", "Loss nan").replace("Grad. Norm 0.2143", "Grad. Norm inf"))
    assert line is not None and line.process == "trainer"
    assert math.isnan(line.values["loss"]) and math.isinf(line.values["grad_norm"])
    assert sorted(line.nonfinite) == ["grad_norm", "loss"]
    assert line.values["mfu"] == 0.121 and line.values["step_time"] == 38.9 and line.values["lr"] == 3e-06


def test_repeated_step_lines_parse_to_rows_of_their_own():
    """Segments are parsed once and remembered (a long run repeats most of them): each line still gets
    rows of its own, and a later line's values are its own."""
    first, again = parse_step_line(H_TRAINER), parse_step_line(H_TRAINER)
    assert first is not None and again is not None and first.values == again.values
    first.values["loss"] = -1.0
    first.nonfinite.append("loss")
    assert again.values["loss"] == 0.0012 and again.nonfinite == []
    changed = parse_step_line(H_TRAINER.replace("Loss 0.0012", "Loss 0.5").replace("Step 3", "Step 4"))
    assert changed is not None and changed.step == 4 and changed.values["loss"] == 0.5
    assert {k: v for k, v in changed.values.items() if k != "loss"} == {k: v for k, v in again.values.items() if k != "loss"}


def test_l_step_lines():
    trainer = parse_step_line("Step 7 | Time: 12.34s | Loss: 0.0012 | Entropy: 0.4410 | Grad. Norm: 0.2143 | LR: 3.00e-06")
    assert trainer is not None and trainer.process == "trainer"
    assert trainer.values["step_time"] == 12.34 and trainer.values["entropy"] == 0.441
    orch = parse_step_line("Step 7 | Time: 9.50s | Reward: 0.4312 | Seq. Length: 512.3 tokens/sample | Max. Off-Policy Level: 2")
    assert orch is not None and orch.process == "orchestrator"
    assert orch.values == {"step_time": 9.5, "reward": 0.4312, "seq_len": 512.3, "off_policy_max": 2.0}


def test_durations_as_format_time_writes_them():
    assert parse_duration("850ms") == 0.85
    assert parse_duration("41.2s") == 41.2
    assert parse_duration("2m 5s") == 125
    assert parse_duration("1h 3m") == 3780
    assert parse_duration("1d 2h") == 93600
    assert parse_duration("Reward") is None


def test_eval_lines_both_layouts():
    h = parse_eval_line("Evaluated reverse-text (Step 50) | Policy v50 |   12.0s | Reward 0.5123 | Turns 1.0 | Error 0.0%")
    assert (h.env, h.step, h.score) == ("reverse-text", 50, 0.5123)
    lay = parse_eval_line("Evaluated math in 12.34s (Avg@4=0.3120, Pass@4=0.5000, Truncated: 2.0%)")
    assert (lay.env, lay.step, lay.score) == ("math", None, 0.312)


def test_glog_lines_of_torch_and_torchrun_are_dated_heads():
    watchdog = "[trainer0]:[rank0]:[E0824 14:26:12.609015433 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective"
    head = parse_head(clean(watchdog.encode()))
    assert head is not None and head.level == "ERROR" and head.seconds == 14 * 3600 + 26 * 60 + 12
    assert head.message == "[Rank 0] Watchdog caught collective"
    torchrun = "E0824 14:26:13.908960 45716 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: -6)"
    head = parse_head(clean(torchrun.encode()))
    assert head is not None and (head.level, head.message) == ("ERROR", "failed (exitcode: -6)")
    assert parse_head("E0824 is not a glog line") is None
