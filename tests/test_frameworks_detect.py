"""detect.py: which framework wrote a text, a file or a run directory."""

from __future__ import annotations

from rlagent.tools.frameworks.detect import detect, detect_dir, detect_file, detect_text

VERL = "(TaskRunner pid=1) step:1 - critic/score/mean:0.43 - timing_s/step:80.2\nstep:2 - actor/entropy:np.float64(0.4)"
TRL = "{'loss': 0.0012, 'grad_norm': 0.28, 'learning_rate': 9.6e-07, 'epoch': 0.12}\n  3%|▎  | 12/400 [08:20<4:29:12, 41.66s/it]"
OPENRLHF = "INFO 08-13 19:25:45 ppo_trainer.py:547] ✨ Global step 7: {'policy_loss': -0.0031, 'kl': 0.00091}"
OPENRLHF_OLD = "Episode [1/1]:  12%|█▏  | 1/8 [00:41<04:47, 41.0s/it, policy_loss=-0.0031, kl=0.000912]"
PRIME = (
    "14:05:58 SUCCESS Step 3 |   41.2s | Reward 0.4312 | Trainable 112/128 (87.5%) | Turns 1.0 | Truncation 3.1%\n"
    "[trainer0]:14:06:01 SUCCESS Step 3 |   38.9s | Loss 0.0012 | Entropy 0.4410 | Grad. Norm 0.2143 | LR 3.00e-06\n"
    "Step 4 | Time: 12.34s | Loss: 0.0012 | Entropy: 0.44"
)


def test_each_framework_from_text():
    assert detect_text(VERL).framework == "verl" and detect_text(VERL).counts == {"verl": 2}
    assert detect_text(TRL).framework == "trl"
    assert detect_text(OPENRLHF).framework == "openrlhf"
    assert detect_text(OPENRLHF_OLD).framework == "openrlhf"
    assert detect_text(PRIME).framework == "prime-rl" and detect_text(PRIME).counts == {"prime-rl": 3}


def test_nothing_and_lookalikes():
    result = detect_text("hello\ntiming_s/step:80.2 - a:1\nglobal_step_40\n{'model': 'x'}\n\x00\xff")
    assert result.framework is None and not result.mixed and result.counts == {}


def test_mixed():
    result = detect_text(VERL + "\n" + OPENRLHF)
    assert result.mixed and result.framework == "verl" and result.counts == {"verl": 2, "openrlhf": 1}


def test_file_and_directory_layouts(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(TRL)
    assert detect_file(log).framework == "trl"
    assert detect(str(log)).framework == "trl"
    assert detect(TRL).framework == "trl"  # a str that is not a path is text

    verl_dir = tmp_path / "verl_run"
    (verl_dir / "checkpoints" / "p" / "e" / "global_step_20" / "actor").mkdir(parents=True)
    (verl_dir / "checkpoints" / "p" / "e" / "latest_checkpointed_iteration.txt").write_text("20")
    assert detect_dir(verl_dir).framework == "verl" and detect_dir(verl_dir).counts == {"verl": 2}

    trl_dir = tmp_path / "trl_run"
    (trl_dir / "checkpoint-500").mkdir(parents=True)
    (trl_dir / "checkpoint-500" / "trainer_state.json").write_text("{}")
    assert detect(trl_dir).framework == "trl"

    orl_dir = tmp_path / "orl_run"
    (orl_dir / "ckpt" / "_actor" / "global_step10").mkdir(parents=True)
    (orl_dir / "ckpt" / "_actor" / "latest").write_text("global_step10")
    (orl_dir / "driver.out").write_text(OPENRLHF)
    assert detect(orl_dir).counts == {"openrlhf": 3}

    prime_dir = tmp_path / "prime_run"
    (prime_dir / "logs" / "attempt_0").mkdir(parents=True)
    (prime_dir / "logs" / "attempt_0" / "trainer.log").write_text(PRIME)
    (prime_dir / "checkpoints" / "step_10").mkdir(parents=True)
    assert detect(prime_dir).framework == "prime-rl"

    assert detect(tmp_path / "missing").framework is None
    binary = tmp_path / "blob.log"
    binary.write_bytes(bytes(range(256)) * 100)
    assert detect_file(binary).framework is None


def _count_every_line(text: str) -> dict[str, int]:
    """The definition count_text keeps: every cleaned segment of every line, matched against every signature."""
    from rlagent.tools.frameworks.detect import _TEXT_SIGNATURES
    from rlagent.tools.frameworks.lines import iter_lines

    counts = dict.fromkeys(_TEXT_SIGNATURES, 0)
    for line in iter_lines(text):
        for name, pattern in _TEXT_SIGNATURES.items():
            counts[name] += pattern.search(line.text) is not None
    return counts


def test_counting_only_the_lines_with_a_hint_counts_what_every_line_gives():
    """count_text skips lines holding no hint of a signature: over every log of the real cases, the
    simulated fixtures and the examples, and over lines whose signature ANSI codes, a Ray prefix or a
    carriage return hide, it counts exactly what matching every line does."""
    from pathlib import Path

    from rlagent.tools.frameworks.detect import HEAD_BYTES, count_text
    from rlagent.tools.frameworks.lines import decode

    root = Path(__file__).resolve().parents[1]
    texts = [VERL, TRL, OPENRLHF, OPENRLHF_OLD, PRIME]
    texts.append(
        "\x1b[32m14:05:58\x1b[0m SUCCESS \x1b[1mStep\x1b[0m 3 | 41.2s | Reward 0.43\n"  # ESC splits `Step 3`
        "(WorkerDict pid=9, ip=10.0.0.2) st\x1b[0mep:4 - actor/entropy:0.4 [repeated 3x across cluster]\n"
        "  5%|▌ | 20/400 [09:10<3:01:02]\r{'loss': 0.1, 'grad_norm': 0.3}\r  6%|▌ | 24/400\n"
        "no signature here\n\nGlobal step 9: {'kl': 0.1}"  # no newline at the end
    )
    for folder in ("evals/real", "evals/fixtures", "examples"):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in {".log", ".txt", ".out", ".err"} and path.is_file():
                with open(path, "rb") as handle:
                    texts.append(decode(handle.read(HEAD_BYTES)))
    assert len(texts) > 300
    seen = dict.fromkeys(_count_every_line(""), 0)
    for text in texts:
        expected = _count_every_line(text)
        assert count_text(text) == expected
        for name, count in expected.items():
            seen[name] += count > 0
    assert all(n >= 3 for n in seen.values()), seen  # every framework's signature is among them
