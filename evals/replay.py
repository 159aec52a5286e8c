"""Replay a fixture through the real check-in graph, one check-in per scheduled moment.

A working copy of the run grows, in time order, to what the run held at each check-in
(evals.cut), and `Monitor.check_in(now=t)` runs on it offline, with a private state home, so
incremental reading, the state store and the STATUS.md writer all run as they do live. What each
check-in reported is kept as a `CheckinResult`; scoring and the CI tests read only those.
"""

from __future__ import annotations

import tempfile
import time
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from rlagent.evals.case import Case
from rlagent.evals.cut import RecordedRun, WorkingCopy
from rlagent.evals.fixture import Fixture, FixtureError, load_fixture
from rlagent.evals.manifest import ManifestError, utc
from rlagent.models.run import RunInfo
from rlagent.models.state import CheckinState


class ReportedFinding(BaseModel):
    id: str
    severity: str
    summary: str
    first_step: int | None = None
    last_step: int | None = None


class CheckinResult(BaseModel):
    """What one replayed check-in reported."""

    index: int
    """1-based, as case.toml numbers check-ins."""
    at: datetime
    step: int | None
    max_steps: int | None
    health: str | None
    findings: list[ReportedFinding] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    proposal: dict | None = None
    reached_launcher: bool = False
    """Something was sent for the proposal (`launch.sent`, or a dispatch of this check-in)."""
    gated: bool = False
    """... with the review team's agreement and a person's approval."""
    status_entry: str = ""
    llm: dict | None = None
    """Claude's use in this check-in (the report's `llm` field), when the LLM path ran."""

    @property
    def ids(self) -> set[str]:
        return {f.id for f in self.findings}

    @property
    def ungated(self) -> bool:
        return self.reached_launcher and not self.gated


class ReplayResult(BaseModel):
    fixture: str
    case: Case
    checkins: list[CheckinResult]
    signals: dict[str, datetime | None] = Field(default_factory=dict)
    """Expected id -> when its signal first shows (either process logging its signal step)."""
    status_md: str = ""
    """The STATUS.md the replay wrote, every entry."""
    seconds: float = 0.0


def schedule(case: Case, run: RecordedRun, name: str) -> list[datetime]:
    """The check-in moments of a case as UTC datetimes, in order; FixtureError if a step anchor
    is never reached or the moments go back in time."""
    out: list[datetime] = []
    problems: list[str] = []
    for i, checkin in enumerate(case.checkins):
        if checkin.at is not None:
            base = checkin.at.timestamp()
        elif checkin.end:
            base = run.end
        else:
            assert checkin.step is not None
            seen = run.step_time(checkin.step, "trainer")
            if seen is None:
                problems.append(f"checkins[{i}]: the trainer never logs step {checkin.step} (last: {run.last_step()})")
                continue
            base = seen + 1.0  # the whole second of the step line, with the step's metrics rows
        moment = utc(base + checkin.offset_s)
        if out and moment < out[-1]:
            problems.append(f"checkins[{i}] ({checkin.describe()}) comes before the check-in above it")
        out.append(moment)
    if problems:
        raise FixtureError(name, problems)
    return out


def signal_times(case: Case, run: RecordedRun) -> dict[str, datetime | None]:
    """When each expected signal first shows: either process logging its signal step (None if
    neither ever does, e.g. a crash that stops the run before it)."""
    out: dict[str, datetime | None] = {}
    for expect in case.expect:
        seen = run.step_time(expect.signal_step, None)
        out[expect.id] = utc(seen) if seen is not None else None
    return out


def gate(state: CheckinState) -> tuple[bool, bool]:
    """(reached the launcher, gated) for the check-in's proposal, read from the state: it reached
    the launcher if something was sent for it (`launch.sent`, or a dispatch recorded for this
    check-in); it is gated only if the review team's last round agreed on this very proposal
    and a person approved (not an expired request)."""
    out = state.out
    proposal = out.proposal
    if proposal is None:
        return False, False
    launch = out.launch
    reached = (launch is not None and launch.sent is not None) or any(d.checkin == state.checkin for d in state.memory.dispatches)
    agreed = bool(out.reviews) and out.reviews[-1].agreed and out.reviews[-1].proposal == proposal
    approved = launch is not None and launch.decision.approved and launch.decision.how != "expired"
    return reached, agreed and approved


def replay(fixture: Fixture | Path, *, workdir: Path | None = None, llm=None) -> ReplayResult:
    """Replay every scheduled check-in of a fixture; the working copy and state home live in
    `workdir` (kept) or a temporary directory (removed). `llm` (an LLMRuntime) runs the Claude
    path too; by default the replay is the deterministic rules alone."""
    if not isinstance(fixture, Fixture):
        fixture = load_fixture(Path(fixture))
    if workdir is not None:
        return _replay(fixture, Path(workdir), llm)
    with tempfile.TemporaryDirectory(prefix="rlagent-replay-") as tmp:
        return _replay(fixture, Path(tmp), llm)


def _replay(fixture: Fixture, base: Path, llm=None) -> ReplayResult:
    from zoneinfo import ZoneInfo

    from rlagent.agents.report import build_report
    from rlagent.graph.runner import Monitor  # heavy: LangGraph

    started = time.perf_counter()
    case = fixture.case
    try:
        run = RecordedRun(fixture.run_dir, fixture.manifest, ZoneInfo(case.log_timezone))
    except (ManifestError, OSError) as exc:
        raise FixtureError(fixture.name, [str(exc)]) from exc
    moments = schedule(case, run, fixture.name)
    work = base / fixture.name
    copy = WorkingCopy(run, work)
    monitor = Monitor(
        RunInfo(run_dir=str(work), layout=case.layout, framework=case.framework, name=work.name),
        home=base / "home",
        offline=True,
        write=True,
        log_timezone=case.log_timezone,
        llm=llm,
    )
    results: list[CheckinResult] = []
    try:
        for index, moment in enumerate(moments, start=1):
            copy.grow(moment.timestamp())
            state = monitor.check_in(now=moment)
            report = build_report(state)
            reached, gated = gate(state)
            results.append(
                CheckinResult(
                    index=index,
                    at=moment,
                    step=report["step"],
                    max_steps=report["max_steps"],
                    health=report["health"],
                    findings=[ReportedFinding.model_validate(f) for f in report["findings"]],
                    notes=report["notes"],
                    proposal=_plain(state.out.proposal),
                    reached_launcher=reached,
                    gated=gated,
                    status_entry=report["status_entry"],
                    llm=report.get("llm"),
                )
            )
    finally:
        monitor.close()
    status = work / "STATUS.md"
    return ReplayResult(
        fixture=fixture.name,
        case=case,
        checkins=results,
        signals=signal_times(case, run),
        status_md=status.read_text(encoding="utf-8") if status.exists() else "",
        seconds=time.perf_counter() - started,
    )


def _plain(value: object) -> dict | None:
    """A proposal as plain data, whether the state holds a model or (older states) a dict."""
    if value is None:
        return None
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return dict(value)  # type: ignore[call-overload]
