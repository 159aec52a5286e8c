"""wandb_offline.py: a `.wandb` file written here in the documented LevelDB-log framing, and truncated copies.

The REAL_* payloads are Record bytes that wandb 0.31.0 itself wrote to an offline run (`wandb.log(...,
step=s)` with WANDB_MODE=offline) or serialised with its `wandb_internal_pb2` classes, so the decoder is
checked against the real schema, not only against this file's encoder.
"""

from __future__ import annotations

import math

import pytest

from rlagent.tools.frameworks.wandb_offline import BLOCK, HEADER, offline_runs, read_wandb_file, records

from wandbkit import frame, history_record

# history of step 2: _runtime, _step=2, critic/score/mean=0.2, actor/entropy=NaN, training/global_step=2, flag=true,
# big=1, _timestamp; HistoryRecord.step.num=2; Record.num=14
REAL_HISTORY_STEP2 = bytes.fromhex(
    "080e12b9010a1812085f72756e74696d6582010b302e3235393633343235320a0b12055f73746570820101320a1912116372697469632f73636f"
    "72652f6d65616e820103302e320a15120d6163746f722f656e74726f70798201034e614e0a1a1214747261696e696e672f676c6f62616c5f7374"
    "6570820101320a0d1204666c6167820104747275650a091203626967820101310a24120a5f74696d657374616d70820115312e37393534353832"
    "3532343535373932652b303912020802"
)
# step 3: big=Infinity, train/loss=0.25 (logged without step=, merged into step 3)
REAL_HISTORY_STEP3 = bytes.fromhex(
    "081112e6010a0b12055f73746570820101330a101203626967820108496e66696e6974790a13120a747261696e2f6c6f7373820104302e32350a"
    "1812085f72756e74696d6582010b302e3235393934303332310a2912116372697469632f73636f72652f6d65616e820113302e33303030303030"
    "303030303030303030340a15120d6163746f722f656e74726f7079820103302e350a1a1214747261696e696e672f676c6f62616c5f7374657082"
    "0101330a0d1204666c6167820104747275650a25120a5f74696d657374616d70820116312e37393534353832353234353635353335652b303912"
    "020803"
)
# RunExitRecord with exit_code=-9 (int32 as a 10-byte varint)
REAL_EXIT_MINUS9 = bytes.fromhex("92010b08f7ffffffffffffffff01")
# older style items: key="old/style" (field 1), nested_key=["a","b"], key="_step" value 7, typed number=1.25, integer=-3
REAL_HISTORY_TYPED = bytes.fromhex(
    "124a0a110a096f6c642f7374796c65820103302e350a0a120161120162820101320a0b0a055f73746570820101370a100a05747970656431000000"
    "000000f43f0a0a0a066974797065642805"
)
# the exit Record wandb wrote at run.finish() (num, control, exit with exit_code 0 left out, _info)
REAL_EXIT_RECORD = bytes.fromhex("081482010e220c3074767769633139696d3977c20c0a0a086d6a373478646831920100")


def test_encoder_reproduces_wandb_bytes():
    items = {
        "_runtime": "0.259634252",
        "_step": "2",
        "critic/score/mean": "0.2",
        "actor/entropy": "NaN",
        "training/global_step": "2",
        "flag": "true",
        "big": "1",
        "_timestamp": "1.795458252455792e+09",
    }
    assert history_record(14, items, 2) == REAL_HISTORY_STEP2


@pytest.fixture
def run_file(tmp_path):
    big = {f"val-core/ds{i}/reward/mean@4": str(i / 10) for i in range(3000)}  # > 32 KiB: FIRST/MIDDLE/LAST
    payloads = [REAL_HISTORY_STEP2, REAL_HISTORY_STEP3]
    payloads += [history_record(20 + s, {"_step": str(s), "critic/score/mean": str(s / 100)}, s) for s in range(4, 400)]
    payloads.append(history_record(500, {"_step": "400", **big}, 400))
    payloads.append(REAL_HISTORY_TYPED)
    payloads.append(REAL_EXIT_MINUS9)
    directory = tmp_path / "wandb" / "offline-run-20261123_182411-mj74xdh1"
    directory.mkdir(parents=True)
    path = directory / "run-mj74xdh1.wandb"
    path.write_bytes(frame(payloads))
    return path


def test_reads_every_history_row(run_file):
    result = read_wandb_file(run_file)
    assert result.notes == [] and result.meta == {"exit_code": -9}
    steps = [row.step for row in result.rows]
    assert steps == [2, 3, *range(4, 401), 7]
    step2 = result.rows[0]
    assert step2.values["critic/score/mean"] == 0.2 and math.isnan(step2.values["actor/entropy"])
    assert step2.values["flag"] == 1.0 and step2.time == pytest.approx(1.795458252455792e09)
    assert result.rows[1].values["big"] == math.inf and result.rows[1].values["train/loss"] == 0.25
    assert len(result.rows[-2].values) == 3001 and result.rows[-2].values["val-core/ds2999/reward/mean@4"] == 299.9
    typed = result.rows[-1].values
    assert typed == {"old/style": 0.5, "a.b": 2.0, "_step": 7.0, "typed": 1.25, "ityped": -3.0}


def test_step_key_for_trl_and_openrlhf(run_file):
    rows = read_wandb_file(run_file, step_key="training/global_step").rows
    assert [row.step for row in rows[:3]] == [2, 3, 4]  # falls back to _step where the key is absent


def test_large_record_spans_blocks(run_file):
    data = run_file.read_bytes()
    assert len(data) > 2 * BLOCK
    payloads, notes = records(data)
    assert notes == [] and len(payloads) == 401


@pytest.mark.parametrize("cut", [1, 7, 40, 5000, 60_000])
def test_truncated_copies(run_file, tmp_path, cut):
    data = run_file.read_bytes()
    copy = tmp_path / "cut.wandb"
    copy.write_bytes(data[:-cut])
    result = read_wandb_file(copy)
    assert result.rows and result.notes
    assert "exit_code" not in result.meta
    full = read_wandb_file(run_file).rows
    assert [row.values for row in result.rows] == [row.values for row in full[: len(result.rows)]]


def test_junk_and_corruption(tmp_path, run_file):
    junk = tmp_path / "junk.wandb"
    junk.write_bytes(b"\x00\x01not wandb" * 100)
    assert read_wandb_file(junk).notes == ["not a wandb transaction log (header `:W&B` magic 0xBEE1 missing)"]
    data = bytearray(run_file.read_bytes())
    data[len(HEADER) + 7 + 20] ^= 0xFF  # corrupt the first record's payload
    corrupt = tmp_path / "corrupt.wandb"
    corrupt.write_bytes(bytes(data))
    result = read_wandb_file(corrupt)
    assert result.rows == [] and "checksum mismatch" in result.notes[0]
    empty = tmp_path / "empty.wandb"
    empty.write_bytes(HEADER)
    assert read_wandb_file(empty).rows == []


def test_real_exit_record_means_exit_code_zero(tmp_path):
    path = tmp_path / "done.wandb"
    path.write_bytes(frame([REAL_HISTORY_STEP2, REAL_EXIT_RECORD]))
    assert read_wandb_file(path).meta == {"exit_code": 0}


def test_undecodable_payload_is_counted(tmp_path):
    path = tmp_path / "bad.wandb"
    path.write_bytes(frame([REAL_HISTORY_STEP2, b"\x12\xff\xff\xff\xff\x0f", b"\x0f"]))
    result = read_wandb_file(path)
    assert len(result.rows) == 1 and result.notes == ["2 record(s) could not be decoded"]


def test_offline_runs(run_file, tmp_path):
    assert offline_runs(tmp_path) == [run_file]
    assert offline_runs(tmp_path / "wandb") == [run_file]
