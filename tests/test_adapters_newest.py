"""What a warm framework check-in looks up from names alone: the newest rollouts or completions file of
thousands, and the launch script, read again only when it changed."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rlagent.tools.adapters import adapter_for
from rlagent.tools.adapters.common import script_words
from rlagent.tools.frameworks import verl


def test_the_newest_verl_rollouts_file_is_the_highest_step_of_rollout_files(tmp_path):
    names = ["7.jsonl", "12.jsonl", "012.jsonl", "x.jsonl", ".jsonl", "3.json", "99.jsonl.tmp", "1234567890.jsonl", "a.12.jsonl"]
    for name in names:
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "40.jsonl").mkdir()  # a folder named like one is listed as rollout_files lists it
    step, path = verl.newest_rollout_file(tmp_path)
    every = verl.rollout_files(tmp_path)
    assert step == max(every) == 40 and path == tmp_path / "40.jsonl"
    (tmp_path / "40.jsonl").rmdir()
    step, path = verl.newest_rollout_file(tmp_path)
    assert (step, path.name) == (12, "12.jsonl") and set(every) - {40} == {7, 12}  # a tie: the greater name
    assert verl.newest_rollout_file(tmp_path / "missing") is None


def test_the_newest_trl_completions_file_is_taken_by_its_step_not_its_name(tmp_path):
    folder = tmp_path / "trainer_output" / "completions"
    folder.mkdir(parents=True)
    for step in (99_998, 99_999, 100_000):  # six digits sort before five by name
        table = pa.table({"step": [step], "prompt": ["p"], "completion": [f"c{step}"], "advantage": [0.1], "r": [1.0]})
        pq.write_table(table, folder / f"completions_{step:05d}.parquet")
    (folder / "completions_latest.parquet").write_bytes(b"not a step")
    samples = adapter_for("trl").samples(tmp_path, None)
    assert samples.step == 100_000 and samples.rollouts[0].completion == "c100000"


def test_an_edited_launch_script_is_read_again(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text("python -m openrlhf.cli.train_ppo_ray --pretrain a \\\n  --save_steps 5\n")
    assert script_words(script)[-2:] == ["--save_steps", "5"]
    script.write_text("python -m openrlhf.cli.train_ppo_ray --pretrain b \\\n  --save_steps 9\n")  # the same size
    os.utime(script, ns=(1, 1))
    assert script_words(script)[-2:] == ["--save_steps", "9"] and "b" in script_words(script)
    os.chmod(script, 0)  # unreadable now (unless root): ctime moved, so it is not taken from before
    words = script_words(script)
    assert words == [] or os.geteuid() == 0
    os.chmod(script, 0o644)
    assert adapter_for("openrlhf").launch_script(tmp_path) == script
    assert script_words(Path(tmp_path / "missing.sh")) == []
