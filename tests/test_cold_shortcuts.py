"""The cold read's shortcuts give what the long way gives: warning templates that skip a mask whose
text is absent, metrics.jsonl rows mapped by a plan worked out once per row shape, and a scanned
head line parsed once when the record before it stops at it."""

from __future__ import annotations

import random
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from rlagent.tools.loglines import clean, parse_head
from rlagent.tools.logscan import NEEDLES, scan_file
from rlagent.tools.metric_names import (
    _AGENT_KEY,
    ORCHESTRATOR_AGENT_KEYS,
    ORCHESTRATOR_JSONL_KEYS,
    TRAINER_JSONL_KEYS,
    canonical_plan,
    canonical_values,
)
from rlagent.tools.patterns import _MASKS, message_template

from conftest import loguru_line

# --- warning templates -------------------------------------------------------------------------

fragments = st.sampled_from(
    ["0x", "0xdeadBEEF", "deadbeef", "abcdef1", "'", '"', "'quoted 12'", '"x"', "12", "-3.5e-4", "+7", "e", "x9", " ", "id", "\\"]
)


def template_the_long_way(message: str) -> str:
    for regex, repl, _needed in _MASKS:
        message = regex.sub(repl, message)
    return message[:200]


@settings(max_examples=500, deadline=None)
@given(st.lists(fragments | st.text(max_size=4), max_size=30))
def test_templates_are_those_of_every_mask_run(parts):
    message = "".join(parts)
    assert message_template.__wrapped__(message) == template_the_long_way(message)


# The masks as first written, a `\b` or lookbehind first; the shipped ones put their first character's
# class first, for speed, and must match exactly what these match.
PLAIN_MASKS = (
    re.compile(r"\b0x[0-9a-fA-F]+\b"),
    re.compile(r"\b[0-9a-f]{6,}\b"),
    re.compile(r"(?<![A-Za-z])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"),
)
mask_text = st.text(alphabet="0123456789abcdefABCDEFxXgz_-+.e \n'\"\u00e9\u0663", max_size=24)


@settings(max_examples=3000, deadline=None)
@given(st.lists(fragments | mask_text, max_size=6))
def test_each_mask_matches_what_its_plain_form_matches(parts):
    text = "".join(parts)
    for (shipped, _repl, _needed), plain in zip(_MASKS, PLAIN_MASKS, strict=False):
        assert [m.span() for m in shipped.finditer(text)] == [m.span() for m in plain.finditer(text)]
        assert shipped.sub("<>", text) == plain.sub("<>", text)


# --- metrics.jsonl rows ------------------------------------------------------------------------


def canonical_the_long_way(row: dict, orchestrator: bool) -> dict[str, float]:
    """canonical_jsonl as it was: every known key looked up, then every per-agent key matched."""
    out: dict[str, float] = {}
    table = ORCHESTRATOR_JSONL_KEYS if orchestrator else TRAINER_JSONL_KEYS
    for key, name in table.items():
        value = row.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = float(value)
    if orchestrator:
        for key, value in row.items():
            if key.startswith("train/agg/all/") and isinstance(value, int | float) and not isinstance(value, bool):
                match = _AGENT_KEY.match(key)
                if match:
                    out[ORCHESTRATOR_AGENT_KEYS[match.group(2)]] = float(value)
    return out


KEYS = sorted(
    {*ORCHESTRATOR_JSONL_KEYS, *TRAINER_JSONL_KEYS}
    | {f"train/agg/all/{agent}/{metric}" for agent in ("math", "wiki", "reward") for metric in ORCHESTRATOR_AGENT_KEYS}
    | {"train/agg/all/x/reward/p10", "train/agg/all/reward/mean", "eval/x/all/y/avg@4", "progress/total", "junk"}
)
cell = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=3)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(KEYS), cell), max_size=40), st.booleans())
def test_rows_map_to_the_names_the_long_way_gives(items, orchestrator):
    row = dict(items)
    got = canonical_values(row, canonical_plan(tuple(row), orchestrator))
    want = canonical_the_long_way(row, orchestrator)
    assert list(got) == list(want)  # the same names in the same order
    assert all(got[k] == want[k] or (got[k] != got[k] and want[k] != want[k]) for k in want)  # NaN is NaN


# --- scanned head lines ------------------------------------------------------------------------

HEADS = [
    ("WARNING", "Trace failed in group 3f2a (math-python) - TimeoutError: episode exceeded 600.0s"),
    ("ERROR", "Fatal error in run_orchestrator"),
    ("SUCCESS", "Step 12 | 1m 2s | Reward 0.5 | Error 3.0%"),
    ("INFO", "Resuming training from checkpoint step 10"),
    ("DEBUG", "NCCL INFO comm 0x1 rank 0"),
    ("INFO", "Sampling batch 3 of 8"),  # no needle: a record stops at it, the scan goes past it
]
BODIES = ["Traceback (most recent call last):", '  File "x.py", line 1', "RuntimeError: CUDA error", "\t\t ╰─ env | Error 0.0%"]


def random_log(rng: random.Random, records: int) -> str:
    lines = []
    for i in range(records):
        level, message = rng.choice(HEADS)
        lines.append(loguru_line(f"10:{i // 60 % 60:02d}:{i % 60:02d}", level, message).rstrip("\n"))
        lines += rng.choices(BODIES, k=rng.choice([0, 0, 1, 3]))
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 400))
def test_every_scanned_line_is_the_file_line_it_names(tmp_path_factory, seed, records):
    """A head line reused from the record before it must be that very line: its text and head are
    what cleaning and parsing the file's line at its number give."""
    path = tmp_path_factory.mktemp("scan") / "orchestrator.log"
    data = random_log(random.Random(seed), records).encode()
    path.write_bytes(data)
    lines = data.split(b"\n")
    scan = scan_file(path, 0, len(data), 1)
    for line in scan.lines:
        text = clean(lines[line.line_no - 1])
        assert line.text == text and line.head == parse_head(text)
        for offset, detail in enumerate(line.detail, 1):  # continuation lines are the ones right after
            assert detail == clean(lines[line.line_no - 1 + offset])[: len(detail)]
    # and no record with a line that matters is lost to the one before it
    wanted = {n for n, raw in enumerate(lines, 1) if parse_head(clean(raw)) and any(needle in raw for needle in NEEDLES)}
    assert {line.line_no for line in scan.lines if line.head} == wanted
