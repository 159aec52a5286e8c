"""Writer node: renders the STATUS.md entry (jinja2) and appends it, never rewriting the file.

The entry carries its check-in id, so a check-in re-run after a crash finds it already there.
It is appended through the run's STATUS.md sink (tools.statusfile), which holds SIGINT off
meanwhile: Ctrl-C never leaves half an entry.
"""

from __future__ import annotations

import errno
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from rlagent.agents.entry_digest import entry_digest
from rlagent.agents.llm.runtime import llm_line
from rlagent.models.cluster import NodeProcesses
from rlagent.models.findings import Finding
from rlagent.models.observation import MetricHistory, Observation
from rlagent.models.run import RunConfig
from rlagent.models.state import CheckinState, UnwrittenEntry, typed_node
from rlagent.tools.statusfile import StatusFile, StatusSink, entry_marker
from rlagent.tools.templates import render
from rlagent.tools.textfmt import fmt, pct, sparkline

TREND_STEPS = 24
EVIDENCE_LIMIT = 4


@dataclass(frozen=True)
class WriterDeps:
    run_key: str
    """Stable id of the run as this state home knows it, part of each entry's id."""
    write: bool = True
    status: StatusSink = field(default_factory=StatusFile)
    """Where entries are appended (the run's STATUS.md; a fake in tests)."""


def make_writer(deps: WriterDeps) -> Callable[[CheckinState], dict]:
    def writer(state: CheckinState) -> dict:
        return write(state, deps)

    return typed_node(writer)


def write(state: CheckinState, deps: WriterDeps) -> dict:
    obs = state.out.observation
    assert obs is not None, "the collector runs before the writer"
    digest = entry_digest(state)
    marker = entry_marker(deps.run_key, state.checkin, digest)
    run_dir = Path(state.run.run_dir)
    marks = alert_marks(state)
    # A recorded run re-checked with nothing new would only repeat the last entry word for word (its
    # "now" is its newest line). A replay's check-ins have their own moments: time passing is news there,
    # and so is a silence or an acknowledgement that changed the marks of the last entry written.
    unchanged = (
        obs.offline
        and state.now_override is None
        and state.checkin > 1
        and obs.bytes_read == 0
        and not obs.new_attempt
        and marks == state.memory.entry_marks
    )
    writing = deps.write and not unchanged
    try:
        earlier = deps.status.written_versions(run_dir, deps.run_key, state.checkin) if writing else []
    except OSError:
        earlier = []  # the append below meets the same problem and says it
    shown = obs
    if earlier and digest not in earlier:
        shown = obs.model_copy(update={"notes": [CORRECTION.format(n=state.checkin), *obs.notes]})
    entry = render_entry(state, shown, marker)
    result: dict = {"written": False, "unwritten": state.memory.unwritten}
    if writing and digest in earlier:
        result["write_note"] = (
            f"check-in #{state.checkin} was redone after rlagent stopped, and its entry, identical, "
            "is already in STATUS.md: not appended again"
        )
    elif writing:
        text = entry
        if state.checkin == 1 and not earlier:
            text = render_header(state, obs, entry_marker(deps.run_key, 0)) + "\n" + entry
        this = UnwrittenEntry(checkin=state.checkin, marker=marker, text=text)
        result |= append_in_order(deps.status, run_dir, [*state.memory.unwritten, this])
        if result["write_error"]:
            entry = entry.replace(marker, f"- {result['write_error']}\n{marker}")
    return {
        **result,
        "status_entry": entry,
        "entry_marks": marks if result["written"] else state.memory.entry_marks,
        "checked_at": obs.now,
        # This check-in's events are already in `events`: not stored twice.
        "observation": obs.model_copy(update={"new_events": []}),
    }


def alert_marks(state: CheckinState) -> dict[str, str]:
    """Finding id -> its silence or acknowledgement mark in the entry (`rlagent watch`, `silence`, `ack`)."""
    return {f.id: mark for f in state.out.findings if (mark := state.alerts.mark(f.id))}


CORRECTION = (
    "This entry replaces check-in #{n} above: rlagent stopped after writing it and before saving it, "
    "and the run changed before the check-in was redone"
)
MAX_UNWRITTEN = 48
"""Entries kept for a later append while STATUS.md cannot be written (two days at 1h)."""
_LASTING = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ELOOP})
"""Errors that waiting does not cure: the entry is not kept for a retry."""


def append_in_order(status: StatusSink, run_dir: Path, entries: list[UnwrittenEntry]) -> dict:
    """Append `entries` in order (earlier unwritten ones first); the first failure stops, and
    what is left is kept for the next check-in. Nothing half-written is ever left behind."""
    current = entries[-1]
    left = list(entries)
    written = False
    try:
        while left:
            appended = status.append(run_dir, left[0].text, left[0].marker)
            written = appended if left[0] is current else written
            left.pop(0)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno in _LASTING:
            return {"written": False, "unwritten": [], "write_error": f"STATUS.md could not be written: {why}"}
        dropped = max(0, len(left) - MAX_UNWRITTEN)
        later = f"{len(left) - dropped} entr{'y' if len(left) - dropped == 1 else 'ies'}"
        error = f"STATUS.md could not be written: {why}; nothing half-written was left, and {later} will be appended next time"
        if dropped:
            error += f" ({dropped} older one(s) dropped)"
        return {"written": False, "unwritten": left[dropped:], "write_error": error}
    note = None if written else f"check-in #{current.checkin}'s entry is already in STATUS.md: not appended again"
    return {"written": written, "unwritten": [], "write_error": None, "write_note": note}


def render_entry(state: CheckinState, obs: Observation, marker: str) -> str:
    history, config = state.memory.history, state.memory.config
    notes = list(dict.fromkeys(obs.notes))
    if obs.rollouts_step is None and obs.trainer_step is not None:
        notes.append("no saved rollouts found: samples cannot be read (a monitoring limitation)")
    if state.alerts.retire_finished and any(f.id == "run_finished" for f in state.out.findings):
        notes.append("final check-in: the run finished, so `rlagent watch` retires it (a new attempt brings it back)")
    return render(
        "status_entry.j2",
        checked_at=obs.now,
        step=obs.trainer_step if obs.trainer_step is not None else obs.orchestrator_step,
        max_steps=config.max_steps,
        health=state.out.health.value if state.out.health else "Healthy",
        progress=progress_line(history, config),
        stability=stability_line(history, state.out.findings),
        performance=performance_line(history, obs),
        findings=state.out.findings,
        marks=alert_marks(state),
        samples=samples_worth_quoting(state.out.findings, obs),
        groups=[g for g in obs.warning_groups if g.level != "STDERR"][:8],
        notes=notes[:12],
        evidence_limit=EVIDENCE_LIMIT,
        proposal=state.out.proposal,
        offline=obs.offline,
        reviews=state.out.reviews,
        proposal_notes=state.out.proposal_notes,
        gate=state.gate,
        expires=obs.now + timedelta(seconds=state.gate.expiry_s),
        run_dir=state.run.run_dir,
        llm_notes=state.out.llm.notes if state.out.llm else [],
        llm_line=llm_line(state.out.llm),
        marker=marker,
    )


def samples_worth_quoting(findings: list[Finding], obs: Observation) -> list:
    """When reward, length or entropy move (findings.md), the generated text is what to read."""
    moved = any(f.severity.value != "info" and f.category.value in ("progress", "stability") for f in findings)
    return obs.rollouts[:3] if moved else []


def render_header(state: CheckinState, obs: Observation, marker: str) -> str:
    if obs.live.processes is None:
        processes = "not probed (offline check of a recorded run)"
    elif obs.live.processes:
        processes = ", ".join(f"{p.role} (pid {p.pid})" for p in obs.live.processes) + f"; {obs.live.process_match}"
    else:
        processes = f"none found ({obs.live.process_match})"
    config = state.memory.config
    return render("status_header.j2", run=state.run, config=config, checked_at=obs.now, processes=processes, marker=marker)


def _latest(history: MetricHistory, process: str, metric: str) -> tuple[int, float] | None:
    newest = history.recent(process, metric, 1)  # type: ignore[arg-type]
    return newest[0] if newest else None


def _trend(history: MetricHistory, process: str, metric: str, show: Callable[[float], str] = fmt) -> str | None:
    recent = history.recent(process, metric, TREND_STEPS)  # type: ignore[arg-type]
    if not recent:
        return None
    step, value = recent[-1]
    if len(recent) < 3:
        return f"{show(value)} @ step {step}"
    return f"{show(value)} @ step {step} {sparkline([v for _, v in recent])} (steps {recent[0][0]}-{step})"


def progress_line(history: MetricHistory, config: RunConfig) -> str:
    parts = []
    reward = _trend(history, "orchestrator", "reward")
    parts.append(f"reward/mean {reward}" if reward else "reward/mean n/a (no orchestrator step yet)")
    length_metric = "output_tokens" if history.recent("orchestrator", "output_tokens", 1) else "seq_len"
    length = _trend(history, "orchestrator", length_metric, lambda v: f"{v:.0f}")
    if length:
        cap = config.max_completion_tokens if length_metric == "output_tokens" else config.seq_len
        parts.append(
            f"{'completion tokens' if length_metric == 'output_tokens' else 'seq_len'} {length}"
            + (f" of cap {cap}" if cap else "")
        )
    for metric, label in (("truncation", "truncation"), ("error", "errored"), ("trainable", "trainable")):
        latest = _latest(history, "orchestrator", metric)
        if latest:
            parts.append(f"{label} {pct(latest[1])}")
    latest_evals: dict[str, tuple[int, float]] = {}
    for point in history.evals:
        latest_evals[point.env] = (point.step, point.score)
    for env, (step, score) in sorted(latest_evals.items()):
        parts.append(f"eval {env} {fmt(score)} @ step {step}")
    return "; ".join(parts) + "."


def stability_line(history: MetricHistory, findings: list[Finding]) -> str:
    parts = []
    for metric in ("entropy", "mismatch_kl", "grad_norm"):
        trend = _trend(history, "trainer", metric)
        if trend:
            parts.append(f"{metric} {trend}")
    if not parts:
        return "n/a (no trainer step yet)."
    flagged = [f.id for f in findings if f.category.value == "stability"]
    parts.append(("flagged: " + ", ".join(flagged)) if flagged else "no spikes")
    return "; ".join(parts) + "."


def _recent_median(history: MetricHistory, process: str, metric: str, n: int = 10) -> float | None:
    values = [v for _, v in history.recent(process, metric, n, finite=True)]  # type: ignore[arg-type]
    return statistics.median(values) if values else None


def performance_line(history: MetricHistory, obs: Observation) -> str:
    parts = []
    trainer, orch = _recent_median(history, "trainer", "step_time"), _recent_median(history, "orchestrator", "step_time")
    if trainer is not None and orch is not None:
        parts.append(f"step time (median of last 10) trainer {fmt(trainer, 3)}s vs orchestrator {fmt(orch, 3)}s")
    elif trainer is not None or orch is not None:
        who, seconds = ("trainer", trainer) if trainer is not None else ("orchestrator", orch)
        parts.append(f"step time (median of last 10) {who} {fmt(seconds, 3)}s")
    for process, metric, label in (
        ("trainer", "wait_for_batch", "trainer waits for batch"),
        ("orchestrator", "wait_for_policy", "orchestrator waits for policy"),
    ):
        wait, step = _recent_median(history, process, metric), _recent_median(history, process, "step_time")
        if wait is not None and step:
            parts.append(f"{label} {pct(wait / step)} of its step")
    throughput = _latest(history, "trainer", "throughput")
    if throughput and math.isfinite(throughput[1]):
        parts.append(f"throughput {throughput[1]:.0f} tokens/s")
    vllm = obs.live.vllm
    if vllm:
        usage = vllm.get("kv_cache_usage_perc", vllm.get("gpu_cache_usage_perc"))
        parts.append(
            f"inference KV cache {pct(usage)}, {vllm.get('num_requests_running', 0):.0f} running, "
            f"{vllm.get('num_requests_waiting', 0):.0f} waiting"
        )
    elif obs.offline:
        parts.append("inference pressure not probed (offline)")
    if obs.live.host_ram_percent is not None:
        parts.append(f"host RAM {obs.live.host_ram_percent:.0f}%")
    if obs.live.disk_free_ratio is not None:
        parts.append(f"disk free {pct(obs.live.disk_free_ratio)} ({obs.live.disk_free_gib:.0f} GiB)")
    parts += [node_line(node) for node in obs.live.node_processes or []]
    return ("; ".join(parts) + ".") if parts else "n/a (no step timings yet)."


def node_line(node: NodeProcesses) -> str:
    """What a SLURM job's node runs, and how it was looked at (srun --overlap or ssh)."""
    if not node.ok:
        return f"node {node.node} not probed via {node.via}"
    roles = sorted({title.removeprefix("PRIME-RL::") for title in node.titles})
    return f"node {node.node} (via {node.via}): {', '.join(roles) or 'no PRIME-RL process'}"
