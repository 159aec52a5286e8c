"""The compact observation Claude reads: metric tables and trends, grouped warnings, a few
samples, the rules' findings and the run's history, bounded whatever the size of the logs.

The collector already bounds what it keeps (warning groups, events, samples, a metric window);
here it is cut further by a compaction level (0 = roomy .. 3 = terse) until the whole request
fits the per-call input budget. Numbers are formatted here; the template only lays them out.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from rlagent.models.findings import Finding
from rlagent.models.observation import MetricHistory, Observation, Process
from rlagent.models.state import CheckinState
from rlagent.tools.checkpoints import newest_complete
from rlagent.tools.textfmt import fmt
from rlagent.tools.untrusted import clip


@dataclass(frozen=True)
class Level:
    points: int
    """Recent values shown per metric."""
    groups: int
    events: int
    samples: int
    sample_chars: int
    evidence: int
    """Evidence lines per rule finding."""
    line_chars: int
    notes: int


LEVELS = (
    Level(points=10, groups=8, events=8, samples=3, sample_chars=500, evidence=3, line_chars=240, notes=6),
    Level(points=6, groups=5, events=5, samples=3, sample_chars=280, evidence=2, line_chars=180, notes=4),
    Level(points=4, groups=3, events=3, samples=2, sample_chars=160, evidence=2, line_chars=140, notes=3),
    Level(points=3, groups=2, events=2, samples=1, sample_chars=100, evidence=1, line_chars=100, notes=2),
)

KEY_METRICS: dict[Process, tuple[str, ...]] = {
    "trainer": ("loss", "entropy", "mismatch_kl", "grad_norm", "ref_kl", "step_time", "wait_for_batch", "throughput"),
    "orchestrator": (
        "reward",
        "output_tokens",
        "seq_len",
        "truncation",
        "error",
        "trainable",
        "step_time",
        "wait_for_policy",
        "off_policy_max",
    ),
}
"""Shown first; other metrics in the history follow while there is room."""


def _trend(points: list[tuple[int, float]]) -> str:
    """Change over the shown window, per 10 steps, relative to its first value."""
    finite = [(s, v) for s, v in points if math.isfinite(v)]
    if len(finite) < 3 or finite[-1][0] == finite[0][0]:
        return "n/a"
    (s0, v0), (s1, v1) = finite[0], finite[-1]
    per10 = (v1 - v0) / (s1 - s0) * 10
    if v0 == 0:
        return f"{per10:+.3g}/10 steps"
    return f"{per10 / abs(v0) * 100:+.0f}%/10 steps"


def metric_rows(history: MetricHistory, level: Level) -> list[dict[str, Any]]:
    rows = []
    for process in ("trainer", "orchestrator"):
        table = history.table(process)  # type: ignore[arg-type]
        present: set[str] = set()
        for row in table.values():
            present.update(row)
        ordered = [m for m in KEY_METRICS[process] if m in present]  # type: ignore[index]
        if level.points >= 6:
            ordered += sorted(present - set(ordered))
        for metric in ordered:
            series = history.series(process, metric)  # type: ignore[arg-type]
            if not series:
                continue
            window = series[-48:]
            step_every = max(1, math.ceil(len(window) / level.points))
            shown = window[::-1][::step_every][::-1][-level.points :]
            finite = [v for _, v in window if math.isfinite(v)]
            early = history.early_values(process, metric)  # type: ignore[arg-type]
            bad = len(window) - len(finite)
            rows.append(
                {
                    "process": process,
                    "metric": metric,
                    "early": fmt(statistics.median(early)) if early else "n/a",
                    "recent": " ".join(f"{s}:{fmt(v)}" for s, v in shown),
                    "last": f"{fmt(window[-1][1])} @ {window[-1][0]}",
                    "range": f"{fmt(min(finite))}..{fmt(max(finite))}" if finite else "n/a",
                    "trend": _trend(window),
                    "nonfinite": bad,
                }
            )
    return rows


def brief(state: CheckinState, level: Level) -> dict[str, Any]:
    """Everything the diagnostician's prompt shows, at one compaction level."""
    obs = state.out.observation
    assert obs is not None
    processes = obs.live.processes
    alive = "not probed (offline)" if processes is None else ", ".join(sorted({p.role for p in processes})) or "none found"
    earlier = [f"{fid} (since {r.since:%Y-%m-%d %H:%M}, {r.checkins} check-in(s))" for fid, r in state.memory.remembered.items()]
    previous = [n for record in state.memory.llm_log[-2:] if record.checkin < state.checkin for n in record.notes[:1]]
    proposal = state.out.proposal
    return {
        "run": run_facts(state),
        "trainer_step": obs.trainer_step,
        "orchestrator_step": obs.orchestrator_step,
        "attempt": obs.attempt or "n/a",
        "offline": obs.offline,
        "processes": alive,
        "live": live_line(obs),
        "checkpoints": ", ".join(f"{s} ({'+'.join(parts)})" for s, parts in sorted(obs.checkpoints.items())[-3:]) or "none",
        "resume_from": newest_complete(obs.checkpoints),
        "health": state.out.health.value if state.out.health else "n/a",
        "findings": finding_rows(state.out.findings, level),
        "proposal": proposal.headline() if proposal else None,
        "proposal_for": ", ".join(proposal.addresses) if proposal else "",
        "proposal_notes": [clip(n, level.line_chars) for n in state.out.proposal_notes[: level.notes]],
        "earlier": earlier[:10],
        "previous": [clip(n, 300) for n in previous],
        "metrics": metric_rows(state.memory.history, level),
        "evals": eval_lines(state.memory.history),
        "groups": group_rows(obs, level),
        "events": [
            {"kind": e.kind or e.level, "cite": clip(e.cite(), level.line_chars), "step": e.step}
            for e in obs.new_events[-level.events :]
        ],
        "samples": sample_rows(obs, level),
        "rollouts_step": obs.rollouts_step,
        "input_notes": [clip(n, level.line_chars) for n in obs.notes[: level.notes]],
    }


def run_facts(state: CheckinState) -> dict[str, Any]:
    """The run's name, layout and resolved config, as the prompt's header shows them."""
    config = state.memory.config
    return {
        "name": state.run.name,
        "layout": state.run.layout.value if state.run.layout else state.run.framework.value,
        "model": config.model or "n/a",
        "max_steps": config.max_steps,
        "batch": config.batch_size or (f"{config.token_batch_size} tokens" if config.token_batch_size else "n/a"),
        "group": config.group_size or "n/a",
        "max_completion_tokens": config.max_completion_tokens or "n/a",
        "seq_len": config.seq_len or "n/a",
        "temperature": config.temperature if config.temperature is not None else "n/a",
        "envs": ", ".join(config.envs) or "n/a",
    }


def live_line(obs: Observation) -> str:
    """Host RAM, disk and vLLM gauges of a live check-in ("" offline)."""
    live = []
    if obs.live.host_ram_percent is not None:
        live.append(f"host RAM {obs.live.host_ram_percent:.0f}%")
    if obs.live.disk_free_ratio is not None:
        live.append(f"disk free {obs.live.disk_free_ratio * 100:.0f}%")
    if obs.live.vllm:
        live.append("vLLM " + ", ".join(f"{k}={fmt(v)}" for k, v in sorted(obs.live.vllm.items())[:6]))
    return "; ".join(live)


def eval_lines(history: MetricHistory) -> dict[str, str]:
    """env -> `step:score ...` of the recent evals."""
    evals: dict[str, str] = {}
    for point in history.evals[-24:]:
        evals.setdefault(point.env, "")
        evals[point.env] += f" {point.step}:{fmt(point.score)}"
    return {env: text.strip() for env, text in evals.items()}


def finding_rows(findings: list[Finding], level: Level) -> list[dict[str, Any]]:
    return [
        {
            "id": f.id,
            "severity": f.severity.value,
            "category": f.category.value,
            "summary": clip(f.summary, level.line_chars),
            "steps": f"steps {f.first_step}-{f.last_step}" if f.first_step is not None else "",
            "persisting": f.checkins,
            "evidence": [clip(e, level.line_chars) for e in f.evidence[: level.evidence]],
        }
        for f in findings
    ]


def group_rows(obs: Observation, level: Level) -> list[dict[str, Any]]:
    return [
        {
            "count": g.count,
            "level": g.level,
            "template": clip(g.template, level.line_chars),
            "where": f"{g.first.file}:{g.first.line}" + (f" .. {g.last.file}:{g.last.line}" if g.count > 1 else ""),
        }
        for g in obs.warning_groups[: level.groups]
    ]


def sample_rows(obs: Observation, level: Level) -> list[dict[str, Any]]:
    return [
        {
            "why": r.why,
            "step": r.step,
            "env": r.env or "",
            "reward": fmt(r.reward) if r.reward is not None else "n/a",
            "truncated": r.truncated,
            "error": clip(r.error, 160) if r.error else "",
            "completion": r.completion[: level.sample_chars],
        }
        for r in obs.rollouts[: level.samples]
    ]
