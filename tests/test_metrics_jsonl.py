"""metrics.jsonl (layout H) merged with the logs: interleaved processes, float eval steps,
NaN dropped from the file but witnessed by the log."""

import json
import math

from rlagent.graph.runner import Monitor
from rlagent.tools.layout import discover_run
from rlagent.tools.metrics_jsonl import read_metrics

from runbuilder import HRun


def trainer_rows(step, t):
    return [
        {"step": step, "time": t, "perf/throughput": 10432.5, "perf/mfu": 12.1, "perf/peak_memory": 31.7},
        {"step": step, "time": t, "optim/lr": 3e-06, "optim/grad_norm": 0.21437},
        {"step": step, "time": t, "loss/mean": 0.00123, "entropy/all/mean": 0.44101, "mismatch_kl/all/mean": 0.00081},
        {"step": step, "time": t, "time/step": 38.91, "time/wait_for_batch": 2.5},
        {"step": step, "time": t, "system/ckpt_disk_free_ratio": 0.42},
    ]


def orchestrator_row(step, t):
    return {
        "step": step,
        "time": t,
        "train/agg/all/agent/reward/mean": 0.43121,
        "train/agg/all/agent/reward/min": 0.0,
        "train/agg/all/agent/reward/max": 1.0,
        "train/agg/all/agent/is_truncated/mean": 0.031,
        "train/agg/all/agent/is_trainable/mean": 0.875,
        "train/agg/all/has_error/mean": 0.0,
        "train/agg/all/num_output_tokens/mean": 211.5,
        "time/step": 41.2,
        "time/wait_for_policy": 3.1,
        "off_policy/max": 1,
        "progress/total_rollouts": 1024 * step,
    }


def test_rows_are_split_by_process_and_eval_rows_by_float_step(tmp_path):
    rows = []
    for step in (1, 2):
        t = 1_763_000_000.0 + 40 * step
        tr = trainer_rows(step, t)
        rows += [tr[0], tr[1], orchestrator_row(step, t + 1), tr[2], tr[3], tr[4]]
    rows.append(
        {"step": 2.0, "time": 1_763_000_100.0, "eval/reverse-text/all/agent/avg@4": 0.52, "eval/reverse-text/policy_version": 2}
    )
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 3, "ti')
    read = read_metrics(tmp_path, None)
    assert sorted(read.trainer) == [1, 2] and sorted(read.orchestrator) == [1, 2]
    assert read.trainer[2] == {
        "throughput": 10432.5,
        "peak_mem_gib": 31.7,
        "lr": 3e-06,
        "grad_norm": 0.21437,
        "loss": 0.00123,
        "entropy": 0.44101,
        "mismatch_kl": 0.00081,
        "step_time": 38.91,
        "wait_for_batch": 2.5,
        "ckpt_disk_free_ratio": 0.42,
    }
    assert read.orchestrator[1]["reward"] == 0.43121 and read.orchestrator[1]["trainable"] == 0.875
    assert read.orchestrator[1]["output_tokens"] == 211.5 and read.orchestrator[1]["wait_for_policy"] == 3.1
    assert [(e.env, e.step, e.score) for e in read.evals] == [("reverse-text", 2, 0.52)]
    assert read.cursor.offset == (tmp_path / "metrics.jsonl").stat().st_size - len('{"step": 3, "ti')


def test_nan_from_the_log_survives_the_jsonl_which_dropped_it(tmp_path):
    run = HRun(tmp_path)
    run.steps(3)
    run.steps(1, loss="nan")
    rows = trainer_rows(4, 1_763_000_000.0)
    del rows[2]["loss/mean"]  # prime-rl drops non-finite values from metrics.jsonl
    (run.dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    state = Monitor(discover_run(run.dir), home=tmp_path / "home", offline=True).check_in()
    assert math.isnan(state.memory.history.trainer[4]["loss"])
    assert state.memory.history.trainer[4]["entropy"] == 0.44101  # the precise JSONL value refines the log's
    assert any(f.id == "nan_detected" for f in state.out.findings)
