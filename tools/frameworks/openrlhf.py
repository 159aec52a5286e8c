"""OpenRLHF: `Global step N: {...}` lines, eval lines, tqdm postfixes (<= v0.8.0) and checkpoints (frameworks.md 3).

v0.8.1 and on, PPOTrainer.fit() logs once per step
  `INFO 08-13 19:25:45 ppo_trainer.py:547] ✨ Global step 7: {'critic_loss': 0.0213, ...}`
(ppo_trainer_async.py logs the same without the sparkle). Actor keys come from a set union, so their
order is not stable: the dict is parsed, never read by position. Up to v0.8.0 there is no such line;
the `Episode [e/E]` tqdm bar carries the status in its postfix (`pbar.set_postfix(status)`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from rlagent.tools import safefs
from rlagent.tools.bounds import STEP_DIGITS
from rlagent.tools.frameworks.lines import decode, iter_lines, read_text
from rlagent.tools.frameworks.pydict import parse_py_dict
from rlagent.tools.frameworks.records import Checkpoints, MetricRow, numeric_values

_GLOBAL_STEP = re.compile(r"(?:✨\s*)?Global step (\d+): (\{.*\})\s*$")
EVAL_LINE = re.compile(r"Evaluation completed in [^,]*, global_step (\d+), eval_metrics: (\{.*\})\s*$")
# tqdm meter: `desc: pct%|bar| n/total [elapsed<remaining, rate, k=v, ...]` (also `n it [..]` without total)
_BAR = re.compile(
    r"^(?P<desc>.*?):?\s*(?:(?P<pct>\d+)%\|[^|]*\|\s*)?(?P<n>\d+)(?:/(?P<total>\d+))?(?:it)?\s*\[(?P<meta>[^\[\]]*)\]\s*$"
)
_EPISODE = re.compile(r"Episode \[(\d+)/(\d+)\]")


def parse_global_step_line(line: str, lineno: int | None = None) -> MetricRow | None:
    match = _GLOBAL_STEP.search(line)
    if not match:
        return None
    data = parse_py_dict(match.group(2))
    if data is None:
        return None
    return MetricRow(step=int(match.group(1)), values=numeric_values(data), lineno=lineno)


def parse_eval_line(line: str, lineno: int | None = None) -> MetricRow | None:
    """`✨ Evaluation completed in 0:01:02, global_step 10, eval_metrics: {'eval_gsm8k_pass1': ...}`."""
    match = EVAL_LINE.search(line)
    if not match:
        return None
    data = parse_py_dict(match.group(2))
    if data is None:
        return None
    return MetricRow(step=int(match.group(1)), values=numeric_values(data), lineno=lineno, kind="val")


@dataclass
class TqdmBar:
    desc: str
    n: int
    total: int | None
    postfix: dict[str, float] = field(default_factory=dict)
    """`set_postfix` items, numbers formatted by tqdm `format_num` (`.3g` or str, the shorter)."""


def parse_tqdm(line: str) -> TqdmBar | None:
    match = _BAR.match(line.strip())
    if not match:
        return None
    postfix: dict[str, float] = {}
    for part in match.group("meta").split(", "):
        key, sep, value = part.partition("=")
        if not sep:
            continue
        try:
            postfix[key.strip()] = float(value)
        except ValueError:
            continue
    total = match.group("total")
    return TqdmBar(match.group("desc").strip(), int(match.group("n")), int(total) if total else None, postfix)


def episode_bar_rows(text: str) -> list[MetricRow]:
    """Steps of a <= v0.8.0 log from its `Episode [e/E]` bar. `set_postfix(status)` redraws the bar at
    n = k-1 before `update()` moves it to k, so the step of a new postfix is its first n + 1, counted
    across episodes. Approximate: a resumed run restarts the bar."""
    rows: list[MetricRow] = []
    last: dict[str, float] | None = None
    for line in iter_lines(text):
        bar = parse_tqdm(line.text)
        if bar is None or not bar.postfix:
            continue
        episode = _EPISODE.search(bar.desc)
        if not episode:
            continue
        if bar.postfix == last:
            continue
        last = bar.postfix
        offset = (int(episode.group(1)) - 1) * (bar.total or 0)
        rows.append(MetricRow(step=offset + bar.n + 1, values=dict(bar.postfix), lineno=line.lineno))
    return rows


def parse_console(text: str) -> list[MetricRow]:
    """Global-step and evaluation rows; for a log without any (<= v0.8.0), the Episode-bar rows."""
    rows: list[MetricRow] = []
    for line in iter_lines(text):
        row = parse_global_step_line(line.text, line.lineno) or parse_eval_line(line.text, line.lineno)
        if row is not None:
            rows.append(row)
    if not any(row.kind == "train" for row in rows):
        rows = episode_bar_rows(text) + rows
    return rows


def read_console(path: str | Path) -> list[MetricRow]:
    return parse_console(read_text(path))


_CKPT_DIR = re.compile(rf"^global_step({STEP_DIGITS})$", re.ASCII)


def checkpoints(ckpt_path: str | Path) -> Checkpoints:
    """`{ckpt.path}/_actor/global_stepN/` (DeepSpeed tags) and `_actor/latest` (the tag of the last save)."""
    actor = Path(ckpt_path) / "_actor"
    found = Checkpoints()
    if not safefs.is_dir(actor, found.notes):
        found.notes.append(f"no _actor/ under {ckpt_path}")
        return found
    found.steps = sorted(
        int(m.group(1)) for p in safefs.list_dir(actor, found.notes) if (m := _CKPT_DIR.match(p.name)) and safefs.is_dir(p)
    )
    latest = actor / "latest"
    if safefs.is_file(latest, found.notes):
        try:
            tag = decode(safefs.read_regular(latest, limit=4096)).strip()
        except OSError as exc:
            found.notes.append(f"_actor/latest: unreadable ({safefs.reason(exc)})")
            return found
        match = _CKPT_DIR.match(tag)
        if match:
            found.latest = int(match.group(1))
            if found.latest not in found.steps:
                found.notes.append(f"_actor/latest names {tag} but that folder is missing")
        else:
            found.notes.append(f"_actor/latest holds an unexpected tag: {tag[:40]!r}")
    elif found.steps:
        found.notes.append("no _actor/latest tag file")
    return found
