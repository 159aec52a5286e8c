"""Sample rollouts from the newest rollouts step, in either schema.

L: `run_default/rollouts/step_N/train_rollouts.jsonl`, one vf.RolloutOutput per line (has `reward`).
H: `rollouts/step_N/train/all/traces.jsonl`, one verifiers Episode per line; there is no reward
field: the reward of a trace is the sum of score x weight over its non-null `rewards`.
Completions are model output: kept short and treated as untrusted text (control sequences are
stripped here, as they are read: tools.untrusted).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from rlagent.models.observation import Rollout
from rlagent.models.run import Layout
from rlagent.tools.bounds import STEP_DIGITS
from rlagent.tools.needlesearch import newlines_in
from rlagent.tools.safefs import is_file, list_dir, list_names, open_regular, read_up_to, reason
from rlagent.tools.untrusted import strip_controls

_STEP_DIR = re.compile(rf"^step_({STEP_DIGITS})$")
MAX_COMPLETION = 600
MAX_BYTES = 8 << 20
"""Read at most this much of a rollouts file: enough samples, bounded cost."""
MAX_SAMPLED_LINES = 64
"""Telling samples are picked, and the sample statistics taken, among the rollouts of the first
this-many lines of the step's file."""


def newest_rollouts_file(run_dir: Path, layout: Layout, notes: list[str] | None = None) -> tuple[int, Path] | None:
    base = run_dir / ("rollouts" if layout is Layout.H else "run_default/rollouts")
    steps = sorted(
        ((int(m.group(1)), name) for name in list_names(base, notes, run_dir) if (m := _STEP_DIR.match(name))),
        reverse=True,
    )
    for step, name in steps:
        directory = base / name
        if not list_dir(directory, notes, run_dir):
            continue  # empty, or unreadable (a note)
        candidates = (
            [directory / "train/all/traces.jsonl", directory / "train/effective/traces.jsonl"]
            if layout is Layout.H
            else [directory / "train_rollouts.jsonl"]
        )
        for path in candidates:
            if is_file(path, notes, run_dir) and _size(path) > 0:
                return step, path
    return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def trace_reward(trace: dict[str, Any]) -> float | None:
    """prime-rl's reward of an H trace: sum of score x weight over non-null rewards."""
    rewards = trace.get("rewards")
    if not isinstance(rewards, dict):
        return None
    total, seen = 0.0, False
    for item in rewards.values():
        if not isinstance(item, dict) or item.get("score") is None:
            continue
        weight = item.get("weight", 1.0)
        try:
            total += float(item["score"]) * float(1.0 if weight is None else weight)
        except (TypeError, ValueError, OverflowError):
            continue  # not a number: not part of the reward
        seen = True
    return total if seen else None


def _text_of(messages: Any) -> str:
    if isinstance(messages, str):
        return messages
    if isinstance(messages, dict):
        messages = [messages]
    parts: list[str] = []
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, dict):
                content = message.get("content")
                if isinstance(content, list):
                    content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
                if content:
                    parts.append(str(content))
    return "\n".join(parts)


def _from_l(row: dict[str, Any], step: int) -> Rollout:
    error = row.get("error")
    reward = row.get("reward")
    return Rollout(
        why="",
        step=step,
        env=_env_name(row.get("env_name")),
        reward=float(reward) if isinstance(reward, int | float) else None,
        truncated=bool(row.get("is_truncated")),
        error=strip_controls(error)[:300] if error else None,
        completion=strip_controls(_text_of(row.get("completion")))[:MAX_COMPLETION],
    )


def _from_h(episode: dict[str, Any], step: int) -> list[Rollout]:
    env = _env_name((episode.get("env") or {}).get("name") if isinstance(episode.get("env"), dict) else None)
    errors = episode.get("errors") or []
    out = []
    for trace in episode.get("traces") or []:
        if not isinstance(trace, dict):
            continue
        nodes = trace.get("nodes") or []
        sampled = [n.get("message") for n in nodes if isinstance(n, dict) and n.get("sampled")]
        trace_errors = trace.get("errors") or errors
        out.append(
            Rollout(
                why="",
                step=step,
                env=env,
                reward=trace_reward(trace),
                truncated=trace.get("stop_condition") in ("generation_truncated", "max_tokens", "length")
                or (trace.get("is_completed") is False and not trace_errors),
                error=_error_text(trace_errors),
                completion=strip_controls(_text_of(sampled))[:MAX_COMPLETION],
            )
        )
    if not out and errors:
        out.append(Rollout(why="", step=step, env=env, error=_error_text(errors)))
    return out


def _env_name(name: Any) -> str | None:
    return None if name is None else strip_controls(name)


def _error_text(errors: Any) -> str | None:
    if isinstance(errors, list) and errors:
        first = errors[0]
        if isinstance(first, dict):
            return strip_controls(f"{first.get('type', 'Error')}: {first.get('message', '')}")[:300]
        return strip_controls(first)[:300]
    return None


def l_step_fractions(run_dir: Path, after_step: int) -> dict[int, dict[str, float]]:
    """Layout L: truncated, errored and trainable (non-zero advantage) fractions per rollouts
    step newer than `after_step`.

    L's orchestrator step line has no truncation, error or trainable field; its rollouts file does.
    """
    base = run_dir / "run_default/rollouts"
    out: dict[int, dict[str, float]] = {}
    for directory in list_dir(base):
        match = _STEP_DIR.match(directory.name)
        path = directory / "train_rollouts.jsonl"
        if not match or int(match.group(1)) <= after_step or not is_file(path):
            continue
        truncated = errored = total = with_advantage = trainable = 0
        try:
            with open_regular(path, run_dir) as f:
                data = read_up_to(f, MAX_BYTES)
        except OSError:
            continue  # read_samples says why, for the newest step
        for raw in data.splitlines():
            try:
                row = json.loads(raw)
            except (ValueError, RecursionError):
                continue
            if isinstance(row, dict):
                total += 1
                truncated += bool(row.get("is_truncated"))
                errored += bool(row.get("error"))
                advantage = row.get("advantage")
                if isinstance(advantage, int | float) and not isinstance(advantage, bool):
                    with_advantage += 1
                    trainable += advantage != 0  # a group whose rollouts all score alike teaches nothing
        if total:
            fractions = {"truncation": truncated / total, "error": errored / total}
            if with_advantage:
                fractions["trainable"] = trainable / with_advantage
            out[int(match.group(1))] = fractions
    return out


def sample_key(run_dir: Path, layout: Layout, found: tuple[int, Path] | None = None) -> str | None:
    """Identity of the newest rollouts file (`found`, else looked up): an unchanged file need not be sampled again."""
    found = found or newest_rollouts_file(run_dir, layout)
    if found is None:
        return None
    try:
        st = found[1].stat()
    except OSError:
        return None
    return f"{found[1]}:{st.st_size}:{st.st_mtime_ns}"


def read_samples(
    run_dir: Path, layout: Layout, found: tuple[int, Path] | None = None
) -> tuple[int | None, int, list[Rollout], list[str]]:
    """(step, rollouts in that step's file (lines), the rollouts of its first MAX_SAMPLED_LINES
    lines, notes) of the newest rollouts file (`found`, else looked up)."""
    notes: list[str] = []
    found = found or newest_rollouts_file(run_dir, layout, notes)
    if found is None:
        return None, 0, [], notes
    step, path = found
    rollouts: list[Rollout] = []
    bad = 0
    rel = path.relative_to(run_dir)
    try:
        with open_regular(path, run_dir) as f:
            data = read_up_to(f, MAX_BYTES)
    except OSError as exc:
        return None, 0, [], [*notes, f"{rel}: unreadable ({reason(exc)})"]
    head, count = head_and_count(data, MAX_SAMPLED_LINES, cut=len(data) == MAX_BYTES)
    for raw in head:
        try:
            row = _json(raw)
            if not isinstance(row, dict):
                raise ValueError("not an object")
            rollouts.extend(_from_h(row, step) if layout is Layout.H else [_from_l(row, step)])
        except (ValueError, TypeError, AttributeError, RecursionError, ValidationError):
            bad += 1  # malformed, or not of the schema (a field of the wrong type)
    if bad:
        notes.append(f"{rel}: skipped {bad} malformed line(s) among the first {MAX_SAMPLED_LINES}")
    return step, count, rollouts, notes


def head_and_count(data: bytes, n: int, *, cut: bool) -> tuple[list[bytes], int]:
    """The first `n` lines of `data` and how many lines it has, as `data.splitlines()` counts them
    (without the last one when the read was `cut` short), without splitting a file of several MB
    of which only the first lines are parsed."""
    if b"\r" in data:  # splitlines' other line ends: its own rules
        lines = data.splitlines()
        lines = lines[:-1] if cut and lines else lines
        return lines[:n], len(lines)
    count = newlines_in(data) + (0 if data.endswith(b"\n") or not data else 1)
    count -= 1 if cut and count else 0
    end = 0
    for _ in range(min(n, count)):
        end = data.find(b"\n", end) + 1 or len(data)
    return data[:end].splitlines(), count


def _json(raw: bytes) -> Any:
    """orjson, 4x as fast; Python's json for what only it reads (NaN, integers past 64 bits)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def pick_telling(rollouts: list[Rollout]) -> list[Rollout]:
    """Best, worst, one truncated, one errored: what a researcher would open first."""
    picked: list[Rollout] = []
    scored = [r for r in rollouts if r.reward is not None and math.isfinite(r.reward)]
    if scored:
        picked.append(max(scored, key=lambda r: r.reward or 0.0).model_copy(update={"why": "best"}))
        worst = min(scored, key=lambda r: r.reward or 0.0)
        if len(scored) > 1:
            picked.append(worst.model_copy(update={"why": "worst"}))
    truncated = next((r for r in rollouts if r.truncated), None)
    if truncated is not None:
        picked.append(truncated.model_copy(update={"why": "truncated"}))
    errored = next((r for r in rollouts if r.error), None)
    if errored is not None:
        picked.append(errored.model_copy(update={"why": "errored"}))
    return picked
