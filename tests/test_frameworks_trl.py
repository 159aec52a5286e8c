"""trl.py: console dicts of transformers 4.x and 5.x, steps, trainer_state.json, completions parquet."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq

from rlagent.tools.frameworks import trl

# frameworks.md 2.1, transformers <= 4.57 (verbatim)
LINE_4X = (
    "{'loss': 0.0012, 'grad_norm': 0.28411388397216797, 'learning_rate': 9.6e-07, 'num_tokens': 412160.0, "
    "'completions/mean_length': 287.4375, 'completions/min_length': 41.0, 'completions/max_length': 1024.0, "
    "'completions/clipped_ratio': 0.0625, 'completions/mean_terminated_length': 244.9, "
    "'completions/min_terminated_length': 41.0, "
    "'completions/max_terminated_length': 1003.0, 'rewards/accuracy_reward/mean': 0.53125, 'rewards/accuracy_reward/std': 0.5, "
    "'reward': 0.53125, 'reward_std': 0.41, 'frac_reward_zero_std': 0.375, 'entropy': 0.61, 'clip_ratio/low_mean': 0.0, "
    "'clip_ratio/low_min': 0.0, 'clip_ratio/high_mean': 0.0, 'clip_ratio/high_max': 0.0, 'clip_ratio/region_mean': 0.0, "
    "'step_time': 41.7, 'epoch': 0.12}"
)
# frameworks.md 2.1, transformers >= 5.0 (its `...` filled in with the same keys as strings)
LINE_5X = (
    "{'loss': '0.001234', 'grad_norm': '0.2841', 'learning_rate': '9.6e-07', 'num_tokens': '4.122e+05', "
    "'completions/mean_length': '287.4', 'completions/clipped_ratio': '0.0625', 'reward': '0.5312', "
    "'frac_reward_zero_std': '0.375', 'step_time': '41.7', 'epoch': '0.12'}"
)
SUMMARY = (
    "{'train_runtime': 1234.5, 'train_samples_per_second': 1.2, 'train_steps_per_second': 0.08, 'train_loss': 0.01, 'epoch': 1.0}"
)
BAR = "  3%|▎         | 12/400 [08:20<4:29:12, 41.66s/it]"


def test_transformers_4x_line():
    (row,) = trl.parse_console(LINE_4X)
    assert row.step is None and row.kind == "train"
    assert row.values["grad_norm"] == 0.28411388397216797
    assert row.values["learning_rate"] == 9.6e-07
    assert row.values["rewards/accuracy_reward/mean"] == 0.53125
    assert row.values["frac_reward_zero_std"] == 0.375
    assert len(row.values) == 24


def test_transformers_5x_string_values():
    (row,) = trl.parse_console(LINE_5X)
    assert row.values["loss"] == 0.001234 and row.values["num_tokens"] == 412200.0
    assert row.values["learning_rate"] == 9.6e-07 and row.values["epoch"] == 0.12


def test_bare_nan_inf_and_none():
    line = "{'loss': nan, 'grad_norm': inf, 'learning_rate': 1e-06, 'kl': None, 'reward': -inf, 'note': 'nan inf'}"
    (row,) = trl.parse_console(line)
    assert math.isnan(row.values["loss"]) and row.values["grad_norm"] == math.inf and row.values["reward"] == -math.inf
    assert math.isnan(row.values["kl"])  # GRPO logs None when every value of the window was NaN
    assert "note" not in row.values


def test_5x_nan_string():
    (row,) = trl.parse_console("{'loss': 'nan', 'grad_norm': 'inf', 'learning_rate': '1e-06'}")
    assert math.isnan(row.values["loss"]) and row.values["grad_norm"] == math.inf


def test_tqdm_bars_eval_summary_and_other_dicts():
    text = "\n".join(
        [
            BAR,
            "\r" + " " * 80 + "\r" + LINE_4X,
            "{'model_name_or_path': 'Qwen/Qwen2-0.5B', 'beta': 0.0}",  # a script's own print: not a log
            "{'eval_loss': 0.5, 'eval_reward': 0.4, 'eval_runtime': 12.0, 'epoch': 0.12}",
            "[rank0]: " + LINE_5X,
            "{'loss': 0.1, 'learning_rate': __import__('os')}",  # never evaluated
            SUMMARY,
        ]
    )
    rows = trl.parse_console(text)
    assert [row.kind for row in rows] == ["train", "val", "train", "summary"]
    assert [row.lineno for row in rows] == [2, 4, 5, 7]


def test_assign_steps_from_logging_steps():
    rows = trl.parse_console("\n".join([LINE_4X, "{'eval_loss': 0.5, 'epoch': 0.12}", LINE_4X, LINE_5X, SUMMARY]))
    stepped = trl.assign_steps(rows, 10)
    assert [row.step for row in stepped] == [10, 10, 20, 30, 30]
    assert rows[0].step is None  # the input is not mutated
    assert [r.step for r in trl.assign_steps(rows, 10, logging_first_step=True)] == [1, 1, 10, 20, 20]
    assert [r.step for r in trl.assign_steps(rows, 10, first_step=25)] == [30, 30, 40, 50, 50]
    assert [r.step for r in trl.assign_steps(rows, 10, max_steps=25)] == [10, 10, 20, 25, 25]


def test_assign_steps_from_epoch():
    rows = trl.parse_console("{'loss': 0.1, 'epoch': 0.12}\n{'loss': 0.1, 'learning_rate': 1.0}")
    assert [r.step for r in trl.assign_steps_from_epoch(rows, 100)] == [12, None]


def test_trainer_state(tmp_path):
    state = {
        "global_step": 20,
        "logging_steps": 10,
        "max_steps": 400,
        "log_history": [
            {"epoch": 0.05, "grad_norm": 0.3, "learning_rate": 1e-06, "loss": 0.001, "reward": 0.5, "step": 10},
            {"epoch": 0.1, "grad_norm": float("nan"), "learning_rate": 1e-06, "loss": 0.002, "step": 20},
            {"epoch": 0.1, "eval_loss": 0.4, "eval_reward": 0.45, "step": 20},
        ],
    }
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(state, indent=2, sort_keys=True))  # Python json writes NaN literally
    result = trl.read_trainer_state(path)
    assert [(row.step, row.kind) for row in result.rows] == [(10, "train"), (20, "train"), (20, "val")]
    assert math.isnan(result.rows[1].values["grad_norm"])
    assert "step" not in result.rows[0].values
    assert result.meta == {"global_step": 20, "logging_steps": 10, "max_steps": 400}
    path.write_text(json.dumps(state)[:-40])
    truncated = trl.read_trainer_state(path)
    assert truncated.rows == [] and truncated.notes


def test_completions_parquet(tmp_path):
    directory = tmp_path / "completions"
    directory.mkdir()
    for step in (10, 20):
        table = pa.table(
            {
                "step": [step, step],
                "prompt": ["2+2?", "3+3?"],
                "completion": ["4", "!!!!"],
                "accuracy_reward": [1.0, 0.0],
                "format_reward": [1.0, float("nan")],
                "source": ["gsm8k", "gsm8k"],
                "advantage": [0.7, -0.7],
            }
        )
        pq.write_table(table, directory / f"completions_{step:05d}.parquet")
    (directory / "completions_00030.parquet").write_bytes(b"PAR1 not really")
    result = trl.read_completions(directory)
    assert [(s.step, s.completion, s.advantage) for s in result.rows] == [
        (10, "4", 0.7),
        (10, "!!!!", -0.7),
        (20, "4", 0.7),
        (20, "!!!!", -0.7),
    ]
    assert result.rows[0].scores == {"accuracy_reward": 1.0, "format_reward": 1.0}
    assert math.isnan(result.rows[1].scores["format_reward"])
    assert result.rows[0].extra == {"source": "gsm8k"}
    assert any("completions_00030" in note for note in result.notes)


def test_checkpoints(tmp_path):
    (tmp_path / "checkpoint-500").mkdir()
    (tmp_path / "checkpoint-500" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-1000").mkdir()
    (tmp_path / "runs").mkdir()
    found = trl.checkpoints(tmp_path)
    assert found.steps == [500, 1000] and found.latest == 1000
    assert found.notes == ["checkpoint-1000 has no trainer_state.json"]
