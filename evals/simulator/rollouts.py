"""Saved rollout samples: H `traces.jsonl` (verifiers v1 episode records) and L `train_rollouts.jsonl`.

A monitor reads samples to see *why* a metric moved (cut-off answers, `!!!!` after a NaN,
identical answers in a collapsed group), so the samples follow the step's stats: rewards around
the step's mean, truncation and errors at the step's rates, and failure-specific text. Texts are
kept short (a few hundred characters) so runs stay small; token counts in `usage` follow the
simulated lengths, token-id lists follow the text actually stored.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace

from .dynamics import Dynamics, StepStats
from .metrics import reward_name
from .rng import hexid, stream
from .scenario import Scenario

_TEXT = (
    "the quick brown fox jumps over a lazy dog while seven silver kites drift above quiet harbour "
    "lanterns glow softly as curious otters gather smooth pebbles near the old stone bridge"
)
_NAMES = "Ava Ben Chloe Daniel Elena Felix Grace Hugo Iris Jonah Kira Liam Maya Noah Olive Pablo"
WORDS = tuple(_TEXT.split())
NAMES = tuple(_NAMES.split())
VERIFIERS = {"version": "0.2.1", "commit": "a60a606ecc4d309247edf9ff92c3eabca362781f"}


@dataclass(frozen=True, slots=True)
class Sample:
    example_id: int
    group: int
    system: str
    user: str
    answer: str
    completion: str
    reward: float
    truncated: bool
    error: str | None
    input_tokens: int
    output_tokens: int
    advantage: float
    seconds: float


def _task(env: str, rng: random.Random) -> tuple[str, str, str, str]:
    """(system prompt, user message, reference answer, answer tag) for one example."""
    if env == "alphabet-sort":
        names = rng.sample(NAMES, rng.randint(4, 7))
        return (
            "Sort the names alphabetically. Respond with <alphabetical_sorted>...</alphabetical_sorted>.",
            "Sort these names: " + ", ".join(names),
            "\n".join(sorted(names)),
            "alphabetical_sorted",
        )
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 9)))
    return (
        "Reverse the given text character by character. Respond with <reversed_text>...</reversed_text>.",
        text,
        text[::-1],
        "reversed_text",
    )


def _corrupt(text: str, reward: float, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(round((1 - reward) * len(chars) * 0.6)):
        if chars:
            chars[rng.randrange(len(chars))] = rng.choice("etaoinsrhl ")
    return "".join(chars)


def samples(sc: Scenario, dyn: Dynamics, n: int, env: str, count: int, kind: str = "train") -> list[Sample]:
    """`count` finished samples of step n on `env`, grouped by `group_size` (eval: by `eval_k`).
    `kind` also keys the random stream, so "train", "eval" and "lost" draw different tasks."""
    st: StepStats = dyn.at(n)
    rng = stream(sc.seed, "samples", kind, n, env)
    per_group = sc.eval_k if kind == "eval" else sc.group_size
    collapse = dyn.collapse_factor(n)
    broken = dyn.policy_broken(n)
    mean = next((e.reward for e in st.envs if e.name == env), st.reward)
    out: list[Sample] = []
    for g in range(-(-count // per_group)):
        example_id = rng.randrange(20000)
        system, user, answer, tag = _task(env, stream(sc.seed, "task", example_id, env))
        rewards = []
        for _ in range(min(per_group, count - g * per_group)):
            # collapsed entropy: every member of the group gives the same answer
            r = rng if collapse > 0.3 else stream(sc.seed, "group", kind, n, env, g)
            reward = min(1.0, max(0.0, r.gauss(mean, st.reward_std)))
            truncated = rng.random() < st.truncation
            if broken:
                body = "!" * 200
            elif truncated:
                body = f"<{tag}>\n" + " ".join(r.choice(WORDS) for _ in range(60))
            else:
                body = f"<{tag}>\n{_corrupt(answer, reward, r)}\n</{tag}>"
            if truncated or broken:
                reward *= 0.3
            out_tokens = (
                sc.max_completion_tokens if truncated or broken else max(3, round(st.output_tokens * r.uniform(0.6, 1.3)))
            )
            rewards.append(reward)
            out.append(
                Sample(
                    example_id=example_id,
                    group=g,
                    system=system,
                    user=user,
                    answer=answer,
                    completion=body,
                    reward=reward,
                    truncated=truncated,
                    error=None,
                    input_tokens=round(st.input_tokens * rng.uniform(0.8, 1.2)),
                    output_tokens=min(out_tokens, sc.max_completion_tokens),
                    advantage=0.0,
                    seconds=st.gen_s * rng.uniform(0.2, 0.9),
                )
            )
        base = sum(rewards) / len(rewards)
        for j in range(len(out) - len(rewards), len(out)):
            out[j] = replace(out[j], advantage=round(out[j].reward - base, 4))
    return out


# ---- H: verifiers v1 episode records ---------------------------------------------------------


def _tokens(rng: random.Random, count: int) -> list[int]:
    return [rng.randrange(151643) for _ in range(count)]


def episode_record(
    sc: Scenario, s: Sample, env: str, step: int, policy: int, t0: float, kind: str, effective: bool, rng: random.Random
) -> dict:
    """One `vf.Episode.to_record()` line: no top-level reward; score it as sum(score*weight)."""
    text_tokens = max(1, len(s.completion) // 4)
    prompt_ids = _tokens(rng, min(s.input_tokens, (len(s.system) + len(s.user)) // 4 + 8))
    out_ids = _tokens(rng, min(text_tokens, 64))
    rname = reward_name(env)
    nodes: list[dict] = [
        {"parent": None, "message": {"role": "system", "content": s.system}, "sampled": False, "timestamp": round(t0, 3)},
        {
            "parent": 0,
            "message": {"role": "user", "content": s.user},
            "sampled": False,
            "timestamp": round(t0, 3),
            "token_ids": prompt_ids,
            "mask": [False] * len(prompt_ids),
        },
    ]
    calls: list[dict] = []
    if not s.error:
        node, call = _sampled_turn(sc, s, t0, out_ids, effective, rng)
        nodes.append(node)
        calls.append(call)
    errors = [{"type": s.error.split(": ", 1)[0], "message": s.error.split(": ", 1)[1]}] if s.error else []
    trace: dict = {
        "version": 1,
        "id": hexid(rng),
        "verifiers": VERIFIERS,
        "task": {"type": "Task", "data": {"prompt": s.user, "answer": s.answer}},
        "agent": {"config": {"type": "chat", "model": sc.model}, "name": "agent", "trainable": kind == "train"},
        "tools": [],
        "nodes": nodes,
        "calls": calls,
        "rewards": {} if s.error else {rname: {"score": round(s.reward, 4), "weight": 1.0}},
        "metrics": {} if s.error else {rname: round(s.reward, 4)},
        "info": {"advantage": s.advantage} if effective else {},
        "is_completed": not s.truncated and not s.error,
        "ok": not s.error,
        "stop_condition": "error" if s.error else ("generation_truncated" if s.truncated else "completed"),
        "errors": errors,
        "timing": _timing(t0, s.seconds),
    }
    return {
        "id": hexid(rng),
        "env": {"id": env, "name": env},
        "task": {"type": "Task", "data": {"prompt": s.user, "answer": s.answer}, "key": f"{s.example_id}"},
        "group": {"id": hexid(stream(sc.seed, "gid", kind, step, env, s.group))},
        "run": {
            "type": "train",
            "id": hexid(stream(sc.seed, "runid"), 16),
            "name": sc.run_name,
            "work": {"type": kind, "step": step, "policy": {"start": policy, "end": policy}},
        },
        "ok": not s.error,
        "errors": errors,
        "traces": [trace],
    }


def _sampled_turn(
    sc: Scenario, s: Sample, t0: float, out_ids: list[int], effective: bool, rng: random.Random
) -> tuple[dict, dict]:
    """The model's turn of a trace: its node (tokens, logprobs, advantages when shipped) and call."""
    node = {
        "parent": 1,
        "message": {"role": "assistant", "content": s.completion},
        "sampled": True,
        "timestamp": round(t0 + s.seconds, 3),
        "token_ids": out_ids,
        "mask": [True] * len(out_ids),
        "is_content": [True] * len(out_ids),
        "logprobs": [round(-abs(rng.gauss(0.3, 0.4)), 4) for _ in out_ids],
    }
    if effective:
        node["advantages"] = [s.advantage] * len(out_ids)
    call = {
        "node": 2,
        "model": sc.model,
        "sampling": {"temperature": 1.0, "max_tokens": sc.max_completion_tokens},
        "endpoint": "/chat/completions",
        "finish_reason": "length" if s.truncated else "stop",
        "usage": {"input_tokens": s.input_tokens, "output_tokens": s.output_tokens},
        "time": {"start": round(t0 + 0.05, 3), "end": round(t0 + s.seconds, 3)},
    }
    return node, call


def _timing(t0: float, seconds: float) -> dict:
    """A trace's phases from `t0`: boot, setup, the agent (model and harness), finalize, scoring."""
    return {
        "start": round(t0, 3),
        "boot": {"start": round(t0, 3), "end": round(t0 + 0.01, 3)},
        "setup": {"start": round(t0 + 0.01, 3), "end": round(t0 + 0.03, 3)},
        "agent": {
            "start": round(t0 + 0.03, 3),
            "end": round(t0 + seconds, 3),
            "model": {"duration": round(seconds * 0.95, 3)},
            "harness": {"duration": round(seconds * 0.05, 3)},
        },
        "finalize": {"start": round(t0 + seconds, 3), "end": round(t0 + seconds + 0.004, 3)},
        "scoring": {"start": round(t0 + seconds + 0.004, 3), "end": round(t0 + seconds + 0.007, 3)},
    }


def h_traces(sc: Scenario, dyn: Dynamics, n: int, kind: str, policy: int, epoch0: float) -> dict[str, bytes]:
    """`{train|eval}/{all,effective}/traces.jsonl` contents for step n (relative to rollouts/step_n).

    `effective/` is the shipped batch; `all/` also holds the failed and cancelled episodes, in
    arrival order (it is appended episode by episode)."""
    envs = sc.envs if kind == "train" else sc.eval_env_names
    st = dyn.at(n)
    arrivals: list[tuple[float, str]] = []
    eff_lines: list[str] = []
    for env in envs:
        share = next((e.ratio for e in st.envs if e.name == env), 1.0) if kind == "train" else 1.0
        rng = stream(sc.seed, "trace", kind, n, env)
        count = round(sc.batch_size * share) if kind == "train" else sc.eval_examples * sc.eval_k
        for s in samples(sc, dyn, n, env, count, kind):
            t0 = epoch0 + rng.uniform(0, st.gen_s)
            arrivals.append((t0, json.dumps(episode_record(sc, s, env, n, policy, t0, kind, False, rng))))
            eff_lines.append(json.dumps(episode_record(sc, s, env, n, policy, t0, kind, True, rng)))
        if kind != "train":
            continue
        lost = round((st.failed + st.cancelled_n) * share)
        for i, s in enumerate(samples(sc, dyn, n, env, lost, "lost")):
            failed = i < round(st.failed * share)
            error = "TimeoutError: episode exceeded 600.0s" if failed else "Cancelled: past max_off_policy_steps=8"
            s = replace(s, error=error, completion="", reward=0.0, truncated=False, output_tokens=0)
            t0 = epoch0 + rng.uniform(0, st.gen_s)
            arrivals.append((t0, json.dumps(episode_record(sc, s, env, n, policy, t0, kind, False, rng))))
    all_lines = [line for _, line in sorted(arrivals, key=lambda a: a[0])]
    return {
        f"{kind}/all/traces.jsonl": ("\n".join(all_lines) + "\n").encode(),
        f"{kind}/effective/traces.jsonl": ("\n".join(eff_lines) + "\n").encode(),
    }


# ---- L: vf.RolloutOutput lines ---------------------------------------------------------------


def rollout_output(sc: Scenario, s: Sample, env: str) -> dict:
    rname = reward_name(env)
    return {
        "example_id": s.example_id,
        "prompt": [{"role": "system", "content": s.system}, {"role": "user", "content": s.user}],
        "completion": [{"role": "assistant", "content": s.completion}],
        "answer": s.answer,
        "task": env,
        "info": {},
        "reward": round(s.reward, 4),
        "is_completed": not s.truncated and not s.error,
        "is_truncated": s.truncated,
        "metrics": {} if s.error else {rname: round(s.reward, 4)},
        "timing": {
            "total": round(s.seconds + 0.02, 3),
            "overhead": 0.02,
            "setup": {"duration": 0.004},
            "generation": {"duration": round(s.seconds, 3)},
            "model": {"duration": round(s.seconds * 0.97, 3)},
            "env": {"duration": round(s.seconds * 0.03, 3)},
            "scoring": {"duration": 0.003},
        },
        "error": s.error,
        "stop_condition": "max_tokens" if s.truncated else None,
        "token_usage": {"input_tokens": s.input_tokens, "output_tokens": s.output_tokens},
        "env_name": env,
        "advantage": s.advantage,
        "is_filtered": False,
        "filters": {},
        "sampling_args": {"temperature": 1.0, "max_tokens": sc.max_completion_tokens},
    }


def l_rollouts(sc: Scenario, dyn: Dynamics, n: int, kind: str) -> bytes:
    st = dyn.at(n)
    lines: list[str] = []
    envs = sc.envs if kind == "train" else sc.eval_env_names
    for env in envs:
        share = next((e.ratio for e in st.envs if e.name == env), 1.0) if kind == "train" else 1.0
        count = round(sc.batch_size * share) if kind == "train" else sc.eval_examples * sc.eval_k
        batch = samples(sc, dyn, n, env, count, kind)
        lines += [json.dumps(rollout_output(sc, s, env)) for s in batch]
    return ("\n".join(lines) + "\n").encode()
