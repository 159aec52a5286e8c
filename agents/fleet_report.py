"""The fleet view of runs: a summary row and a report snapshot from a check-in's state, and the
self-contained HTML report (jinja2 template in prompts/, plots as server-rendered SVG).

The page has no script and a Content-Security-Policy that forbids every fetch: it opens offline,
and nothing in it (run names, finding summaries, STATUS.md text, which quotes model output) can
run or load anything; jinja2 autoescapes all of it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache

import jinja2

from rlagent.models.fleet import FindingView, Mark, Plot, RunSnapshot, RunSummary, Series
from rlagent.models.incidents import Incident, Silence
from rlagent.models.observation import MetricHistory
from rlagent.models.run import Framework, RunInfo
from rlagent.models.state import CheckinState
from rlagent.tools.svgplot import downsample, line_plot, sparkline_svg

# (key, title, unit, [(process, metric, label)], scale)
PLOTS: tuple[tuple[str, str, str, tuple[tuple[str, str, str], ...], float], ...] = (
    ("reward", "reward", "", (("orchestrator", "reward", "reward/mean"),), 1.0),
    ("entropy", "entropy", "", (("trainer", "entropy", "entropy"),), 1.0),
    ("kl", "KL", "", (("trainer", "mismatch_kl", "mismatch_kl"), ("trainer", "ref_kl", "ref_kl")), 1.0),
    (
        "length",
        "length",
        "tokens",
        (("orchestrator", "seq_len", "seq_len"), ("orchestrator", "output_tokens", "completion")),
        1.0,
    ),
    ("truncation", "truncation", "%", (("orchestrator", "truncation", "truncated"),), 100.0),
    ("grad_norm", "grad norm", "", (("trainer", "grad_norm", "grad_norm"),), 1.0),
    ("step_time", "step time", "s", (("trainer", "step_time", "trainer"), ("orchestrator", "step_time", "orchestrator")), 1.0),
)


def framework_of(run: RunInfo) -> str:
    return Framework(run.framework).value


def _median_step_time(history: MetricHistory) -> float | None:
    for process in ("trainer", "orchestrator"):
        values = [v for _, v in history.recent(process, "step_time", 10, finite=True) if v > 0]  # type: ignore[arg-type]
        if values:
            return statistics.median(values)
    return None


def summary_of(state: CheckinState, *, wall: datetime | None = None, retired: bool = False) -> RunSummary:
    obs = state.out.observation
    step = None
    if obs is not None:
        step = obs.trainer_step if obs.trainer_step is not None else obs.orchestrator_step
    max_steps = state.memory.config.max_steps
    finished = any(f.id == "run_finished" for f in state.out.findings)
    per_step = _median_step_time(state.memory.history)
    eta = None
    down = state.out.health is not None and state.out.health.value == "Down"
    if per_step and step is not None and max_steps and step < max_steps and not finished and not down:
        eta = (max_steps - step) * per_step
    return RunSummary(
        run_dir=state.run.run_dir,
        name=state.run.name,
        framework=framework_of(state.run),
        layout=state.run.layout.value if state.run.layout is not None else None,  # None: verl, TRL, OpenRLHF
        health=state.out.health.value if state.out.health else None,
        step=step,
        max_steps=max_steps,
        steps_per_hour=3600.0 / per_step if per_step else None,
        eta_s=eta,
        checkin=state.checkin,
        checked_at=obs.now if obs is not None else None,
        checked_wall=wall,
        findings=[f.id for f in state.out.findings],
        finished=finished,
        retired=retired,
        behind=bool(obs.behind) if obs is not None else False,
    )


def plots_of(history: MetricHistory) -> list[Plot]:
    plots = []
    steps = {process: sorted(history.table(process)) for process in ("trainer", "orchestrator")}  # type: ignore[arg-type]
    for key, title, unit, wanted, scale in PLOTS:
        series = []
        for process, metric, label in wanted:
            table = history.table(process)  # type: ignore[arg-type]
            raw = [(s, row[metric]) for s in steps[process] if metric in (row := table[s])]  # as history.series
            if not raw:
                continue
            finite = [(s, v * scale) for s, v in raw if math.isfinite(v)]
            bad = [s for s, v in raw if not math.isfinite(v)]
            series.append(Series(name=label, points=downsample(finite), nonfinite_steps=bad[-50:]))
        if series:
            plots.append(Plot(key=key, title=title, unit=unit, series=series))
    return plots


def marks_of(state: CheckinState, incidents: Sequence[Incident]) -> list[Mark]:
    marks: dict[tuple[str, int, str], Mark] = {}
    for incident in incidents:
        step = incident.first_step if incident.first_step is not None else incident.last_step
        if step is None:
            continue
        status = "open" if incident.open else f"resolved at step {incident.resolved_step}"
        marks[("finding", step, incident.finding_id)] = Mark(
            kind="finding",
            step=step,
            label=f"{incident.finding_id} ({incident.severity.value}, {status})",
            severity=incident.severity,
        )
    for finding in state.out.findings:
        if finding.first_step is not None and finding.severity.value != "info":
            key = ("finding", finding.first_step, finding.id)
            marks.setdefault(key, Mark(kind="finding", step=finding.first_step, label=finding.id, severity=finding.severity))
    for event in state.memory.events:
        if event.kind == "resumed" and event.numbers:
            step = int(event.numbers[0])
            marks[("restart", step, "")] = Mark(
                kind="restart", step=step, label=f"restart from checkpoint step {step} ({event.file})"
            )
    for record in state.memory.dispatches:
        if record.resume_step is not None:
            marks.setdefault(
                ("restart", record.resume_step, ""),
                Mark(
                    kind="restart",
                    step=record.resume_step,
                    label=f"{record.action.value} sent by rlagent (check-in #{record.checkin})",
                ),
            )
    return sorted(marks.values(), key=lambda m: (m.step, m.kind, m.label))


def snapshot_of(
    state: CheckinState,
    incidents: Sequence[Incident] = (),
    silences: Sequence[Silence] = (),
    *,
    wall: datetime | None = None,
    retired: bool = False,
    plots: bool = False,
) -> RunSnapshot:
    """What the report shows of the run after this check-in; its plots only when asked (`plots`):
    drawing them walks the whole history, and only a report rendered from memory needs them now
    (`rlagent report` draws them from the run's store: graph/fleetview.py)."""
    obs = state.out.observation
    findings = [
        FindingView(
            id=f.id,
            severity=f.severity.value,
            summary=f.summary,
            evidence=[e if len(e) <= 240 else e[:239] + "…" for e in f.evidence[:4]],
            first_step=f.first_step,
            silenced=state.alerts.mark(f.id),
        )
        for f in state.out.findings
    ]
    notes = list(dict.fromkeys(obs.notes))[:12] if obs is not None else []
    if obs is not None and obs.trainer_step is None and obs.orchestrator_step is None:
        notes.insert(0, "no step yet: nothing to plot")
    return RunSnapshot(
        summary=summary_of(state, wall=wall, retired=retired),
        plots=plots_of(state.memory.history) if plots else [],
        marks=marks_of(state, incidents),
        findings=findings,
        incidents=list(incidents)[-50:],
        silences=list(silences),
        notes=notes,
    )


# --- HTML ------------------------------------------------------------------------------------


@cache
def _templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rlagent.prompts", "."),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["duration"] = duration
    env.filters["when"] = lambda d: d.astimezone(UTC).strftime("%Y-%m-%d %H:%M") + " UTC" if d else "n/a"
    return env


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    seconds = int(seconds)
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 86400}d{(seconds % 86400) // 3600}h"


def _plot_svg(plot: Plot, marks: Sequence[Mark], run_index: int) -> str:
    return line_plot(
        plot.title,
        [(s.name, s.points, s.nonfinite_steps) for s in plot.series],
        [(m.step, m.kind, m.severity, m.label) for m in marks],
        unit=plot.unit,
        key=f"{run_index}:{plot.key}",
    )


def render_report(
    snapshots: Sequence[RunSnapshot],
    *,
    title: str,
    entries: dict[str, list[str]] | None = None,
    notes: Sequence[str] = (),
    generated_at: datetime | None = None,
    fleet: bool | None = None,
    subtitle: str = "",
) -> str:
    """The report page. `entries`: run dir -> its newest STATUS.md entries (oldest first)."""
    from markupsafe import Markup

    entries = entries or {}
    runs = []
    order = {"Down": 0, "Degraded": 1, "Healthy": 2, None: 3}
    ordered = sorted(snapshots, key=lambda s: (s.summary.retired, order.get(s.summary.health, 3), s.summary.name))
    for index, snap in enumerate(ordered):
        reward = next((p for p in snap.plots if p.key == "reward"), None)
        runs.append(
            {
                "anchor": f"run-{index}",
                "snap": snap,
                "s": snap.summary,
                "plots": [Markup(_plot_svg(p, snap.marks, index)) for p in snap.plots],
                "spark": Markup(sparkline_svg([v for _, v in reward.series[0].points])) if reward else "",
                "open": [i for i in snap.incidents if i.open],
                "resolved": [i for i in snap.incidents if not i.open][-10:],
                "entries": entries.get(snap.summary.run_dir, []),
                "progress": (
                    min(100.0, 100.0 * snap.summary.step / snap.summary.max_steps)
                    if snap.summary.step is not None and snap.summary.max_steps
                    else None
                ),
            }
        )
    counts = {h: sum(1 for s in snapshots if s.summary.health == h) for h in ("Healthy", "Degraded", "Down")}
    return (
        _templates()
        .get_template("report.html.j2")
        .render(
            title=title,
            subtitle=subtitle,
            runs=runs,
            counts=counts,
            open_total=sum(len(r["open"]) for r in runs),
            fleet=len(runs) > 1 if fleet is None else fleet,
            notes=list(notes),
            generated_at=generated_at or datetime.now(UTC),
        )
    )


def split_entries(text: str, limit: int) -> list[str]:
    """The newest `limit` entries of a STATUS.md text (each starts with `## `), oldest first."""
    chunks: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("## ") and current:
            chunks.append("\n".join(current).strip())
            current = []
        current.append(line)
    if current:
        chunks.append("\n".join(current).strip())
    chunks = [c for c in chunks if c.startswith("## ")]
    return chunks[-limit:] if limit > 0 else []
