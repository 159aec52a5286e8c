"""openrlhf.py: Global step lines (any key order), eval lines, <= v0.8.0 tqdm postfixes, checkpoints."""

from __future__ import annotations

import math
import random

from rlagent.tools.frameworks import openrlhf
from rlagent.tools.frameworks.pydict import parse_py_dict

# frameworks.md 3.1 (verbatim)
DOC_LINE = (
    "(PPOTrainer pid=48211) INFO 08-13 19:25:45 ppo_trainer.py:547] ✨ Global step 7: {'critic_loss': 0.0213, "
    "'values': 0.41, 'critic_lr': 9e-06, 'critic_grad_norm': 1.3, 'policy_loss': -0.0031, 'actor_lr': 5e-07, "
    "'actor_grad_norm': 0.42, 'ppo_clip_ratio': 0.0012, 'ppo_kl': 3.1e-05, 'kl': 0.00091, 'logprobs_diff': 0.0004, "
    "'reward': 0.37, 'group_reward_std': 0.41, 'return': 0.36, 'response_length': 412.3, 'truncated': 0.03, "
    "'total_length': 655.1, 'timing/make_experience': 31.2, 'timing/ppo_train': 40.1, 'timing/broadcast': 3.2, "
    "'rollout/reward_mean': 0.37, 'rollout/reward_std': 0.48, 'rollout/response_length_mean': 412.3, "
    "'rollout/truncated_rate': 0.03, 'rollout/num_samples': 1024.0, 'timing/generation': 55.0, 'timing/step_total': 129.5}"
)
ACTOR_BAR = (
    "(PolicyModelActor pid=48301) Train epoch [1/1]: 100%|██████████| 8/8 [00:41<00:00,  5.12s/it, act_loss=-0.0031, "
    "reward=0.37, return=0.36, gen_len=412, tot_len=655, kl=0.000912, act_lr=5e-7, grad_norm=0.42]"
)


def test_doc_line():
    (row,) = openrlhf.parse_console(DOC_LINE)
    assert row.step == 7 and row.kind == "train" and len(row.values) == 27
    assert row.values["policy_loss"] == -0.0031 and row.values["ppo_kl"] == 3.1e-05
    assert row.values["timing/step_total"] == 129.5


def test_key_order_does_not_matter():
    data = parse_py_dict(DOC_LINE.split("Global step 7: ", 1)[1])
    items = list(data.items())
    random.Random(3).shuffle(items)
    shuffled = "INFO 08-13 19:25:46 ppo_trainer.py:547] ✨ Global step 8: {" + ", ".join(f"{k!r}: {v!r}" for k, v in items) + "}"
    (row,) = openrlhf.parse_console(shuffled)
    assert row.step == 8 and row.values == data


def test_async_trainer_line_nan_and_bad_dicts():
    text = "\n".join(
        [
            "INFO 08-13 19:25:45 ppo_trainer_async.py:244] Global step 3: {'policy_loss': nan, 'kl': inf}",
            "✨ Global step 4: {'policy_loss': 0.1",  # cut off
            "✨ Global step 5: not a dict",
        ]
    )
    (row,) = openrlhf.parse_console(text)
    assert row.step == 3 and math.isnan(row.values["policy_loss"]) and row.values["kl"] == math.inf


def test_eval_line_and_newline_formatter():
    text = (
        "INFO 08-13 19:30:00 ppo_trainer.py:594] ✨ Evaluation completed in 0:01:02, global_step 10, "
        "eval_metrics: {'eval_gsm8k_pass1': 0.61, 'eval_gsm8k_pass4': 0.8}\r\n"
        "INFO 08-13 19:30:00 ppo_trainer.py:547] ✨ Global step 10: {'reward': 0.5}"
    )
    rows = openrlhf.parse_console(text)
    assert [(r.step, r.kind) for r in rows] == [(10, "val"), (10, "train")]
    assert rows[0].values == {"eval_gsm8k_pass1": 0.61, "eval_gsm8k_pass4": 0.8}


def test_tqdm_postfix_parsing():
    from rlagent.tools.frameworks.lines import clean_line

    bar = openrlhf.parse_tqdm(clean_line(ACTOR_BAR)[0])
    assert bar.desc == "Train epoch [1/1]" and (bar.n, bar.total) == (8, 8)
    assert bar.postfix == {
        "act_loss": -0.0031,
        "reward": 0.37,
        "return": 0.36,
        "gen_len": 412.0,
        "tot_len": 655.0,
        "kl": 0.000912,
        "act_lr": 5e-7,
        "grad_norm": 0.42,
    }
    assert openrlhf.parse_tqdm("Episode [1/1]:  12%|█▏  | 128/1024 [1:02:11<7:15:02, 29.13s/it]").postfix == {}
    assert openrlhf.parse_tqdm("just text [a, b]") is None


def test_v080_episode_bar_rows():
    # v0.8.0: pbar.set_postfix(status) redraws at n=k-1, then pbar.update() moves to n=k
    def render(n, postfix):
        return f"Episode [1/2]:  {n * 25}%|██▌       | {n}/4 [00:{n:02d}<00:30, 41.0s/it, {postfix}]"

    s1 = "policy_loss=-0.0031, kl=0.000912, reward=0.37, response_length=412, actor_lr=5e-7"
    s2 = "policy_loss=-0.002, kl=0.001, reward=0.4, response_length=400, actor_lr=5e-7"
    text = "\r".join([render(0, s1), render(1, s1), render(1, s2), render(2, s2)])
    text += "\n" + render(0, s1).replace("Episode [1/2]", "Episode [2/2]")
    rows = openrlhf.parse_console(text)
    assert [row.step for row in rows] == [1, 2, 5]
    assert rows[0].values["kl"] == 0.000912 and rows[1].values["reward"] == 0.4


def test_global_step_lines_win_over_bars():
    text = DOC_LINE + "\nEpisode [1/1]:  12%|█▏  | 1/8 [00:41<04:47, 41.0s/it, prompts_consumed=128]"
    assert [row.step for row in openrlhf.parse_console(text)] == [7]


def test_junk_does_not_raise():
    assert openrlhf.parse_console("\x00\xff Global step x: {\n✨ Global step 1: {'a': [1, 2}\n" + "]" * 5000) == []


def test_checkpoints(tmp_path):
    actor = tmp_path / "_actor"
    for step in (10, 20):
        (actor / f"global_step{step}").mkdir(parents=True)
    (tmp_path / "global_step20_hf").mkdir()
    (actor / "latest").write_text("global_step20")
    found = openrlhf.checkpoints(tmp_path)
    assert found.steps == [10, 20] and found.latest == 20 and found.notes == []
    (actor / "latest").write_text("global_step30")
    assert openrlhf.checkpoints(tmp_path).notes
    assert openrlhf.checkpoints(tmp_path / "nowhere").notes
