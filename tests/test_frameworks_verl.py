"""verl.py: console step lines (both styles), file-logger JSONL, rollout dumps, checkpoints."""

from __future__ import annotations

import json
import math

from rlagent.tools.frameworks import verl

# frameworks.md 1.1, reconstructed example (verl >= 0.5, numpy 2), verbatim incl. its `...` elisions.
DOC_LINE = (
    "(TaskRunner pid=221183) step:12 - global_seqlen/min:98123 - global_seqlen/max:101877 - "
    "global_seqlen/minmax_diff:3754 - global_seqlen/balanced_min:99871 - global_seqlen/balanced_max:99990 - "
    "global_seqlen/mean:99950.0 - actor/entropy:0.4213 - perf/mfu/actor_infer:... - actor/pg_loss:np.float64(-0.0021) - "
    "actor/kl_loss:np.float64(0.0013) - actor/pg_clipfrac:np.float64(0.0009) - actor/ppo_kl:np.float64(1.2e-05) - "
    "actor/pg_clipfrac_lower:np.float64(0.0) - actor/kl_coef:np.float64(0.001) - actor/grad_norm:np.float64(0.183) - "
    "perf/mfu/actor:np.float64(0.29) - perf/max_memory_allocated_gb:np.float64(41.2) - "
    "perf/max_memory_reserved_gb:np.float64(52.3) - perf/cpu_memory_used_gb:np.float64(88.1) - actor/lr:np.float64(1e-06) - "
    "training/global_step:12 - training/epoch:0 - critic/score/mean:0.43 - critic/score/max:1.0 - critic/score/min:0.0 - "
    "critic/rewards/mean:0.43 - ... - critic/advantages/mean:0.0011 - ... - response_length/mean:612.3 - "
    "response_length/max:2048.0 - response_length/min:35.0 - response_length/clip_ratio:0.031 - "
    "response_length_non_aborted/mean:612.3 - ... - response/aborted_ratio:0.0 - prompt_length/mean:120.4 - ... - "
    "prompt_length/clip_ratio:0.0 - timing_s/start_profile:... - timing_s/gen:45.1 - timing_s/reward:2.0 - "
    "timing_s/old_log_prob:6.1 - timing_s/ref:5.8 - timing_s/adv:0.1 - timing_s/update_actor:20.3 - "
    "timing_s/update_weights:3.2 - timing_s/step:80.2 - timing_per_token_ms/gen:0.021 - ... - "
    "perf/total_num_tokens:1234567 - perf/time_per_step:80.2 - perf/throughput:1925.3"
)
# docs/start/quickstart.rst style (before v0.5: f"{k}:{v:.3f}")
OLD_LINE = "step:0 - timing/gen:21.470 - timing/ref:4.360 - critic/score/mean:0.004 - response_length/clip_ratio:0.000"


def test_doc_example_new_style():
    rows = verl.parse_console(DOC_LINE)
    assert len(rows) == 1
    row = rows[0]
    assert row.step == 12 and row.kind == "train" and row.lineno == 1
    assert row.values["actor/pg_loss"] == -0.0021
    assert row.values["actor/ppo_kl"] == 1.2e-05
    assert row.values["actor/lr"] == 1e-06
    assert row.values["global_seqlen/min"] == 98123
    assert row.values["timing_s/step"] == 80.2
    assert row.values["perf/throughput"] == 1925.3
    # the key `training/global_step:12` inside the line is a value, not a second step line
    assert row.values["training/global_step"] == 12
    # `...` placeholders are not values
    assert "perf/mfu/actor_infer" not in row.values and "timing_s/start_profile" not in row.values
    assert not any(key.startswith("...") for key in row.values)


def test_old_three_decimal_style():
    (row,) = verl.parse_console(OLD_LINE)
    assert row.step == 0 and row.values == {
        "timing/gen": 21.47,
        "timing/ref": 4.36,
        "critic/score/mean": 0.004,
        "response_length/clip_ratio": 0.0,
    }


def test_step0_validation_line_is_kind_val():
    line = "step:0 - val-core/openai/gsm8k/reward/mean@1:np.float64(0.412) - val-aux/openai/gsm8k/acc/mean@1:np.float64(0.4)"
    (row,) = verl.parse_console(line)
    assert row.step == 0 and row.kind == "val"
    assert row.values["val-core/openai/gsm8k/reward/mean@1"] == 0.412


def test_nan_inf_bools_and_numpy_scalars():
    line = (
        "step:7 - actor/pg_loss:np.float64(nan) - actor/grad_norm:inf - critic/vf_loss:-inf - a/flag:True - "
        "b/flag:np.False_ - c/n:np.int64(3) - d/x:np.float32(0.5) - e/nan:nan - f/str:'hello'"
    )
    (row,) = verl.parse_console(line)
    assert math.isnan(row.values["actor/pg_loss"]) and math.isnan(row.values["e/nan"])
    assert row.values["actor/grad_norm"] == math.inf and row.values["critic/vf_loss"] == -math.inf
    assert row.values["a/flag"] == 1.0 and row.values["b/flag"] == 0.0
    assert row.values["c/n"] == 3.0 and row.values["d/x"] == 0.5
    assert "f/str" not in row.values


def test_lookalikes_are_not_step_lines():
    text = "\n".join(
        [
            "timing_s/step:80.2 - foo:1",
            "training/global_step:40 - x:1",
            "Saving checkpoint to checkpoints/p/e/global_step_40/actor",
            "local_global_step_folder: checkpoints/p/e/global_step_40",
            "Training Progress:  20%|██        | 40/200 [53:20<3:33:20, 80.00s/it]",
            "step:nan - a:1",
            "step:5 -",
        ]
    )
    assert verl.parse_console(text) == []


def test_step_line_glued_to_a_tqdm_bar_and_ray_dedup():
    text = (
        "\x1b[36m(TaskRunner pid=42)\x1b[0m Training Progress:   1%|          | 2/200 [02:41<4:29:12, 81.49s/it]"
        "step:2 - critic/score/mean:0.25 - timing_s/step:81.4 [repeated 2x across cluster]\n"
    )
    (row,) = verl.parse_console(text)
    assert row.step == 2 and row.values == {"critic/score/mean": 0.25, "timing_s/step": 81.4}


def test_junk_and_binary_do_not_raise():
    junk = "\x00\xff step:1 - \x1b[ \n step:x - a:b \r\r\n" + "".join(chr(c) for c in range(32, 2000))
    assert verl.parse_console(junk) == []


def test_file_logger_rows_nulls_and_truncated_tail(tmp_path):
    path = tmp_path / "exp.jsonl"
    lines = [
        json.dumps({"step": 0, "data": {"val-core/gsm8k/reward/mean@1": 0.3}}),
        json.dumps({"step": 1, "data": {"critic/score/mean": 0.31, "actor/pg_loss": None, "note": "text"}}),
        "not json at all",
        json.dumps({"step": 2, "data": {"critic/score/mean": 0.35}}),
        '{"step": 3, "data": {"critic/sco',
    ]
    path.write_text("\n".join(lines))
    result = verl.read_file_logger(path)
    assert [row.step for row in result.rows] == [0, 1, 2]
    assert result.rows[0].kind == "val" and result.rows[1].kind == "train"
    assert math.isnan(result.rows[1].values["actor/pg_loss"])  # orjson wrote NaN as null
    assert "note" not in result.rows[1].values
    assert result.rows[2].lineno == 4
    assert any("incomplete" in note for note in result.notes)
    assert any("1 line(s)" in note for note in result.notes)


def test_rollout_dump(tmp_path):
    rows = [
        {"input": "2+2?", "output": "4", "gts": "4", "score": 1.0, "step": 40, "acc": True},
        {"input": "3+3?", "output": "!!!!", "gts": "6", "score": 0.0, "step": 40, "acc": False},
    ]
    directory = tmp_path / "rollouts"
    directory.mkdir()
    (directory / "40.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n" + '{"input": "cut')
    (directory / "notes.jsonl").write_text("")
    assert list(verl.rollout_files(directory)) == [40]
    result = verl.read_rollouts(directory / "40.jsonl")
    assert [(s.step, s.output, s.score, s.extra) for s in result.rows] == [
        (40, "4", 1.0, {"acc": True}),
        (40, "!!!!", 0.0, {"acc": False}),
    ]
    assert result.notes


def test_checkpoints(tmp_path):
    for step in (20, 40):
        (tmp_path / f"global_step_{step}" / "actor").mkdir(parents=True)
    (tmp_path / "global_step_x").mkdir()
    (tmp_path / verl.TRACKER_FILE).write_text("40")
    found = verl.checkpoints(tmp_path)
    assert found.steps == [20, 40] and found.latest == 40 and found.notes == []
    (tmp_path / verl.TRACKER_FILE).write_text("60")
    assert verl.checkpoints(tmp_path).notes  # tracker names a missing folder
    (tmp_path / verl.TRACKER_FILE).unlink()
    found = verl.checkpoints(tmp_path)
    assert found.latest is None and found.notes
    assert verl.checkpoints(tmp_path / "missing").notes


def test_readers_note_a_missing_file(tmp_path):
    from rlagent.tools.frameworks import trl, wandb_csv, wandb_offline

    missing = tmp_path / "gone.jsonl"
    for reader in (
        verl.read_file_logger,
        verl.read_rollouts,
        trl.read_trainer_state,
        wandb_offline.read_wandb_file,
        wandb_csv.read_wandb_csv,
    ):
        result = reader(missing)
        assert result.rows == [] and result.notes and "cannot read" in result.notes[0], reader


def test_lines_made_by_verls_own_formatting_code():
    """concat_dict_to_str as in verl/utils/logger/aggregate_logger.py (v0.5+), fed numpy 2 scalars."""
    import numbers
    import pprint

    import numpy as np

    def concat_dict_to_str(dict: dict, step):
        output = [f"step:{step}"]
        for k, v in dict.items():
            if isinstance(v, numbers.Number):
                output.append(f"{k}:{pprint.pformat(v)}")
        return " - ".join(output)

    metrics = {
        "actor/pg_loss": np.float64(-0.0021),
        "actor/entropy": np.float32(0.5),
        "num_turns/max": np.int64(3),
        "actor/grad_norm": np.float64("nan"),
        "critic/score/mean": 0.43,
        "response_length/clip_ratio": 1e-06,
        "training/global_step": 12,
        "flag": True,
        "big": float("inf"),
        "table": "dropped by verl",
    }
    line = concat_dict_to_str(metrics, step=12)
    assert "np.float64(-0.0021)" in line  # the numpy >= 2 repr this parser must unwrap
    (row,) = verl.parse_console(line)
    assert row.step == 12 and set(row.values) == set(metrics) - {"table"}
    assert row.values["actor/pg_loss"] == -0.0021 and row.values["num_turns/max"] == 3.0
    assert math.isnan(row.values["actor/grad_norm"]) and row.values["big"] == math.inf and row.values["flag"] == 1.0
    # before v0.5: f"{k}:{v:.3f}"
    old = " - ".join(["step:3"] + [f"{k}:{v:.3f}" for k, v in metrics.items() if isinstance(v, numbers.Number)])
    (old_row,) = verl.parse_console(old)
    assert old_row.values["actor/pg_loss"] == -0.002 and old_row.values["response_length/clip_ratio"] == 0.0
