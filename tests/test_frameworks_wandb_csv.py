"""wandb_csv.py: W&B history CSV exports."""

from __future__ import annotations

import math

from rlagent.tools.frameworks.wandb_csv import parse_csv, read_wandb_csv

PANEL = """\
"Step","grpo-run - train/reward","grpo-run - train/reward__MIN","grpo-run - train/reward__MAX"
"10","0.25","0.2","0.3"
"20","0.5","0.45","0.55"
"30","","",""
"""

HISTORY = """\
_step,_runtime,_timestamp,critic/score/mean,actor/entropy
0,1.5,1795458252.1,0.1,0.5
1,2.5,1795458253.1,0.2,NaN
,3.5,1795458254.1,0.3,0.4
2,4.5,1795458255.1,,0.3
"""

TRL = """\
_step,train/global_step,train/reward,train/loss
0,10,0.2,0.01
1,20,0.3,0.02
"""


def test_panel_export_drops_bounds_and_run_prefix():
    result = parse_csv(PANEL)
    assert [(row.step, row.values) for row in result.rows] == [
        (10, {"train/reward": 0.25}),
        (20, {"train/reward": 0.5}),
        (30, {}),
    ]
    assert result.meta["step_column"] == "Step"


def test_history_export_skips_rows_without_step_and_keeps_missing_cells_missing():
    result = parse_csv(HISTORY)
    assert [row.step for row in result.rows] == [0, 1, 2]
    assert math.isnan(result.rows[1].values["actor/entropy"])
    assert "critic/score/mean" not in result.rows[2].values
    assert result.notes == ["1 row(s) without a step skipped"]


def test_global_step_column_is_preferred_and_can_be_overridden(tmp_path):
    assert [row.step for row in parse_csv(TRL).rows] == [10, 20]
    path = tmp_path / "export.csv"
    path.write_text(TRL)
    assert [row.step for row in read_wandb_csv(path, step_column="_step").rows] == [0, 1]


def test_bad_input():
    assert parse_csv("").notes == ["empty CSV"]
    assert parse_csv("a,b\n1,2\n").notes[0].startswith("no step column")
    ragged = parse_csv('_step,x\n1,0.5,extra\n2\n"3,0.1\n')
    assert [row.step for row in ragged.rows] == [1, 2]
    assert parse_csv("\x00\xff,\n\x00").rows == []
