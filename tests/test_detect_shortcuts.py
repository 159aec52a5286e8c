"""Framework detection, run at every `rlagent check`, takes three shortcuts; each says what the long
way says, on random texts built from the fragments that matter to it:

- a signature's regex is searched only in lines holding its needle (tools.frameworks.detect);
- a segment is cleaned of ANSI codes and Ray's prefix only where it holds an ESC or starts with `(`
  (tools.frameworks.lines; segment by segment in tests/test_console_shortcuts.py, here in whole texts);
- a tree entry is matched against the layout markers only once its name is one of theirs.
"""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from rlagent.tools.frameworks import detect, lines
from rlagent.tools.frameworks.lines import LogLine

from test_console_shortcuts import clean_the_long_way  # lines.clean_line's long way

# The signatures' lines as each framework prints them (tests/test_frameworks_detect.py), and pieces of them.
SIGNATURE_LINES = [
    "step:1 - critic/score/mean:0.43 - timing_s/step:80.2",
    "(TaskRunner pid=1) step:2 - actor/entropy:np.float64(0.4)",
    "{'loss': 0.0012, 'grad_norm': 0.28, 'learning_rate': 9.6e-07, 'epoch': 0.12}",
    "[rank0]: {'eval_loss': 0.5}",
    "INFO 08-13 19:25:45 ppo_trainer.py:547] ✨ Global step 7: {'policy_loss': -0.0031, 'kl': 0.00091}",
    "Episode [1/1]:  12%|█▏  | 1/8 [00:41<04:47, 41.0s/it, policy_loss=-0.0031, kl=0.000912]",
    "14:05:58 SUCCESS Step 3 |   41.2s | Reward 0.4312 | Trainable 112/128 (87.5%)",
    "[trainer0]:14:06:01 SUCCESS Step 3 |   38.9s | Loss 0.0012 | Entropy 0.4410",
]
FRAGMENTS = [
    "step:", "step:12", " - ", "a/b:", "{'", "loss", "': ", "Global step ", "Global step 4: ", "Episode [", "[2/3]:",
    "Step ", "Step 9", " | ", "Loss", "Reward", " 0.5", "=", "]", "(", "(Actor pid=3) ", "(pid=7, ip=1.2.3.4) ",
    "\x1b[31m", "\x1b[0m", "\x1b", "\r", "\n", " ", "x", "[repeated 2x across cluster]", "\u00e9",
]  # fmt: skip
PIECES = st.sampled_from(FRAGMENTS) | st.sampled_from(SIGNATURE_LINES) | st.text(max_size=4)
TEXTS = st.lists(PIECES, max_size=30).map("".join)


def count_text_the_long_way(text: str) -> dict[str, int]:
    counts = dict.fromkeys(detect._TEXT_SIGNATURES, 0)
    for physical in detect._hinted_lines(lines.strip_ansi(text) if "\x1b" in text else text):
        for line in iter_lines_the_long_way(physical):
            for name, pattern in detect._TEXT_SIGNATURES.items():
                if pattern.search(line.text):
                    counts[name] += 1
    return counts


def iter_lines_the_long_way(text: str, first_lineno: int = 1):
    for offset, physical in enumerate(text.split("\n")):
        for segment in physical.split("\r"):
            cleaned, actor = clean_the_long_way(segment)
            if cleaned.strip():
                yield LogLine(first_lineno + offset, cleaned, actor)


def test_every_signature_line_holds_its_needle():
    for text in SIGNATURE_LINES:
        assert detect.count_text(text) == count_text_the_long_way(text), text
        assert any(detect.count_text(text).values()), text


@settings(max_examples=600, deadline=None)
@given(TEXTS)
@example("(\x1b[0mTaskRunner pid=1) step:2 - a/b:1")  # an ESC inside the prefix: removed first, then the prefix
@example("\x1b\x1b[0m[31mStep 3 | x | Loss 0.1")  # stripping once leaves an ANSI code behind
@example("\x1b[31m(pid=7) step:3 - a/b:1")  # a prefix behind a colour: `(` comes first once it is stripped
def test_detection_with_its_shortcuts_counts_what_the_long_way_counts(text):
    assert detect.count_text(text) == count_text_the_long_way(text)
    assert list(lines.iter_lines(text)) == list(iter_lines_the_long_way(text))


def layout_counts_the_long_way(root) -> dict[str, int]:
    import os

    seen: set[tuple[str, int]] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        parent = os.path.basename(dirpath)
        for child in dirnames + filenames:
            for name, markers in detect._LAYOUT.items():
                for index, (parent_re, child_re) in enumerate(markers):
                    if re.fullmatch(child_re, child) and re.fullmatch(parent_re, parent):
                        seen.add((name, index))
    counts = dict.fromkeys(detect._TEXT_SIGNATURES, 0)
    for name, _ in seen:
        counts[name] += 1
    return counts


# Every marker of every framework's layout, and names that nearly are.
TREE_PATHS = [
    "latest_checkpointed_iteration.txt", "global_step_40/actor", "checkpoint-10/trainer_state.json",
    "completions/completions_00010.parquet", "ckpt/_actor/global_step20", "ckpt/_actor/latest",
    "checkpoints/step_40", "logs/trainer.log", "outputs/attempt_1/trainer.log", "logs/latest/trainer.log",
    "global_step_40/critic", "checkpoint-x/trainer_state.json", "completions/completions.parquet",
    "_actor/global_step", "checkpoints/step_", "logs/trainer.log.1", "trainer.log", "actor", "latest",
]  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(TREE_PATHS), max_size=6, unique=True))
def test_the_layout_walk_finds_the_markers_the_long_way_finds(tmp_path_factory, paths):
    root = tmp_path_factory.mktemp("run")
    for rel in paths:
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            target.write_text("")
    assert detect._layout_counts(root) == layout_counts_the_long_way(root)
