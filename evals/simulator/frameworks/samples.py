"""SIMULATED prompts and completions for the frameworks' sample files (verl rollout dumps, TRL completions
parquet, OpenRLHF `Sample:` lines): grade-school arithmetic word problems, answered well, wrongly, cut at
the length cap, degenerate (`!!!!...`, findings.md degenerate_output) or hacked (only what the reward
checks). Each step's share of every kind follows the step's numbers; the texts are deterministic.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..rng import stream
from .numbers import StepNumbers
from .scenario import FrameworkScenario

_NAMES = ("Natalia", "Weng", "Betty", "Julie", "James", "Albert", "Mark", "Ken", "Alexis", "Tina", "Randy", "Joy")
_ITEMS = ("clips", "apples", "pages", "marbles", "stickers", "cookies", "tickets", "shells", "pencils", "stamps")
_FILLER = (
    "Let me re-check the numbers once more to be sure about the total before writing the answer",
    "wait, maybe I should count the ones from the first day again, then add the second day",
    "so the difference between the two amounts is what matters here, and then the rest",
    "hmm, actually the question asks for the total, not the difference, so let me recompute",
)


@dataclass(frozen=True, slots=True)
class Sample:
    prompt: str
    completion: str
    answer: str
    kind: str
    """`ok`, `wrong`, `truncated`, `degenerate` or `hacked`."""
    correct: bool
    format_ok: bool
    tokens: int


def _problem(rng: random.Random) -> tuple[str, int, list[str]]:
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b = rng.randint(6, 60), rng.randint(2, 40)
    if rng.random() < 0.5:
        text = f"{name} had {a} {item} on Monday and got {b} more on Tuesday. How many {item} does {name} have now?"
        steps = [f"{name} starts with {a} {item}.", f"Adding the {b} from Tuesday: {a} + {b} = {a + b}."]
        return text, a + b, steps
    c = rng.randint(2, 6)
    text = f"{name} buys {c} boxes of {item} with {a} {item} in each box. How many {item} does {name} buy?"
    steps = [f"Each box holds {a} {item} and there are {c} boxes.", f"So {c} * {a} = {c * a}."]
    return text, c * a, steps


def _kind(rng: random.Random, num: StepNumbers) -> str:
    u = rng.random()
    if u < num.degenerate_frac:
        return "degenerate"
    u = rng.random()
    if u < num.hacked_frac:
        return "hacked"
    if rng.random() < num.clip_ratio:
        return "truncated"
    return "ok" if rng.random() < num.accuracy / max(1e-6, 1 - num.clip_ratio) else "wrong"


def _format_ok(rng: random.Random, num: StepNumbers) -> bool:
    comps = dict((name, mean) for name, mean, _ in num.components)
    return rng.random() < comps.get("format_reward", 1.0)


def samples(sc: FrameworkScenario, num: StepNumbers, count: int, purpose: str = "train") -> list[Sample]:
    """`count` completions of step `num.n` (grouped by prompt: `group_size` in a row share one)."""
    out: list[Sample] = []
    cap = sc.max_response_length
    prompt_rng = stream(sc.seed, "fw-prompts", purpose, num.n)
    problem: tuple[str, int, list[str]] = _problem(prompt_rng)
    for i in range(count):
        if i % sc.group_size == 0:
            problem = _problem(prompt_rng)
        text, answer, steps = problem
        rng = stream(sc.seed, "fw-sample", purpose, num.n, i)
        kind = _kind(rng, num)
        fmt = _format_ok(rng, num) if kind in ("ok", "wrong") else kind == "hacked"
        value = answer if kind == "ok" else answer + rng.choice((-10, -2, -1, 1, 3, 12))
        completion, tokens = _completion(sc, kind, fmt, steps, value, answer, rng, cap)
        out.append(Sample(_prompt(sc, text), completion, str(answer), kind, kind == "ok", fmt, tokens))
    return out


def _prompt(sc: FrameworkScenario, question: str) -> str:
    if sc.framework == "verl":
        # examples/data_preprocess/gsm8k.py + the Qwen chat template, as _dump_generations decodes it
        return (
            "system\nYou are a helpful assistant.\nuser\n"
            f'{question} Let\'s think step by step and output the final answer after "####".\nassistant\n'
        )
    if sc.framework == "trl":
        return question
    return f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"


def _completion(
    sc: FrameworkScenario,
    kind: str,
    fmt: bool,
    steps: list[str],
    value: int,
    answer: int,
    rng: random.Random,
    cap: int,
) -> tuple[str, int]:
    if kind == "degenerate":
        return "!" * cap, cap
    if kind == "hacked":
        if sc.framework == "trl":
            return "<think>\n</think>\n<answer>\n</answer>", 12
        guesses = " ".join(str(answer + k) for k in range(-3, 4))
        return f"#### {guesses}", 6 + 2 * 7
    reasoning = " ".join(steps)
    if kind == "truncated":
        filler = " ".join(rng.choice(_FILLER) for _ in range(24))
        body = f"{reasoning} {filler}"
        text = f"<think>\n{body}" if sc.framework == "trl" else body
        return text, cap
    extra = " ".join(rng.choice(_FILLER) for _ in range(rng.randint(0, 3)))
    body = f"{reasoning} {extra}".strip()
    if sc.framework == "trl":
        text = f"<think>\n{body}\n</think>\n<answer>\n{value}\n</answer>" if fmt else f"{body} The answer is {value}."
    elif sc.framework == "verl":
        text = f"{body}\n#### {value}"
    else:
        text = f"{body} The answer is \\boxed{{{value}}}."
    return text, max(8, len(text) // 4 + rng.randint(0, 40))
