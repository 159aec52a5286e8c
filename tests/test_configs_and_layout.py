"""Resolved configs of both layouts, run discovery, settings precedence, cadence parsing."""

import json
import os
import time

import pytest

from rlagent.config import ConfigError, load_settings
from rlagent.models.run import Layout
from rlagent.tools.configs import read_run_config
from rlagent.tools.layout import RunNotFound, discover_run
from rlagent.tools.textfmt import parse_cadence


def make_h_run(root, name="run-a"):
    run = root / name
    (run / "configs").mkdir(parents=True)
    (run / "logs" / "attempt_1").mkdir(parents=True)
    (run / "logs" / "latest").symlink_to("attempt_1")
    (run / "configs" / "trainer.json").write_text(
        json.dumps(
            {
                "max_steps": 200,
                "output_dir": str(run),
                "model": {"name": "Qwen/Qwen3-0.6B", "seq_len": 4096},
                "ckpt": {"interval": 25},
                "resume": None,
            }
        )
    )
    (run / "configs" / "orchestrator.json").write_text(
        json.dumps(
            {
                "max_steps": 200,
                "batch_size": 128,
                "token_batch_size": None,
                "group_size": 16,
                "seq_len": 4096,
                "max_off_policy_steps": 8,
                "train": {
                    "sampling": {"temperature": 1.0, "max_completion_tokens": 1024},
                    "source": [{"name": "reverse-text", "group_size": 16}],
                },
                "client": {"base_url": ["http://localhost:8000/v1"]},
            }
        )
    )
    return run


def test_h_configs(tmp_path):
    config = read_run_config(make_h_run(tmp_path), Layout.H)
    assert (config.max_steps, config.model, config.batch_size, config.group_size) == (200, "Qwen/Qwen3-0.6B", 128, 16)
    assert (config.max_completion_tokens, config.seq_len, config.ckpt_interval) == (1024, 4096, 25)
    assert (config.max_off_policy_steps, config.temperature, config.envs) == (8, 1.0, ["reverse-text"])
    assert config.inference_url == "http://localhost:8000" and config.problems == []


def test_l_configs_and_malformed_toml(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "orchestrator.toml").write_text(
        "max_steps = 50\nseq_len = 2048\nbatch_size = 64\nrollouts_per_example = 8\nmax_async_level = 2\n"
        'output_dir = "outputs/run_default"\n[model]\nname = "Qwen/Qwen3-0.6B"\n[train.sampling]\nmax_tokens = 512\n'
    )
    (tmp_path / "configs" / "trainer.toml").write_text("max_steps = 50\n[ckpt\ninterval = 10\n")
    config = read_run_config(tmp_path, Layout.L)
    assert (config.max_steps, config.group_size, config.max_completion_tokens, config.model) == (50, 8, 512, "Qwen/Qwen3-0.6B")
    assert len(config.problems) == 1 and config.problems[0].startswith("configs/trainer.toml: malformed TOML")


def test_discovery_of_a_run_and_of_the_newest_run_in_an_output_dir(tmp_path):
    old, new = make_h_run(tmp_path, "old"), make_h_run(tmp_path, "new")
    for run, age in ((old, 3600), (new, 0)):
        log = run / "logs" / "attempt_1" / "trainer.log"
        log.write_text("x\n")
        os.utime(log, (time.time() - age, time.time() - age))
    assert discover_run(old).name == "old" and discover_run(old).picked_from is None
    picked = discover_run(tmp_path)
    assert picked.name == "new" and picked.picked_from == str(tmp_path.resolve()) and picked.layout is Layout.H


def test_not_a_run_is_a_clear_error(tmp_path):
    with pytest.raises(RunNotFound, match="no such directory"):
        discover_run(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunNotFound, match="not a prime-rl run"):
        discover_run(tmp_path / "empty")


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("10m", 600), ("1h", 3600), ("1h30m", 5400), ("2d", 172800), ("366d", 366 * 86400)]
)
def test_cadence(text, seconds):
    assert parse_cadence(text) == seconds


@pytest.mark.parametrize("text", ["", "1x", "h1", "0s", "-5m", "1.5h", "367d", "99999999999h"])
def test_bad_cadence(text):
    with pytest.raises(ValueError, match="bad cadence"):
        parse_cadence(text)


def test_settings_precedence_defaults_toml_env_flags(tmp_path, monkeypatch):
    config = tmp_path / "rlagent.toml"
    config.write_text('cadence = "10m"\nprobe_timeout_s = 5.0\n[thresholds]\nsustain_steps = 7\ntruncation_high = 0.6\n')
    assert load_settings(None).cadence == "1h"
    from_toml = load_settings(config)
    assert (from_toml.cadence, from_toml.probe_timeout_s, from_toml.thresholds.sustain_steps) == ("10m", 5.0, 7)
    monkeypatch.setenv("RLAGENT_CADENCE", "30s")
    monkeypatch.setenv("RLAGENT_THRESHOLDS__SUSTAIN_STEPS", "9")
    from_env = load_settings(config)
    assert (from_env.cadence, from_env.thresholds.sustain_steps, from_env.thresholds.truncation_high) == ("30s", 9, 0.6)
    assert load_settings(config, cadence="1h30m").cadence_seconds == 5400


def test_bad_settings_are_one_clear_line(tmp_path):
    with pytest.raises(ConfigError, match="cannot read it"):
        load_settings(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("cadence = \n")
    with pytest.raises(ConfigError, match="malformed TOML"):
        load_settings(bad)
    with pytest.raises(ConfigError, match=r"setting cadence: .*bad cadence"):
        load_settings(None, cadence="soon")
    typo = tmp_path / "typo.toml"
    typo.write_text("[thresholds]\nentropy_collapse_ratoi = 0.2\n")  # used to be ignored: the default judged on
    with pytest.raises(ConfigError, match=r"setting thresholds\.entropy_collapse_ratoi: Extra inputs are not permitted"):
        load_settings(typo)
