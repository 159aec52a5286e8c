"""Judging replays against their cases: per fixture, then per finding id and overall.

Definitions (the scoreboard prints them too, so a figure is never ambiguous):
- A *detection* of an expected id is its first report at or above the case's minimum severity,
  at a check-in no earlier than its signal. It is *on time* at or before `by_checkin`; recall
  counts on-time detections only.
- A *false report* is a forbidden id (any severity), a warning or critical id the case neither
  expects nor allows, or an expected id reported before its signal showed. Per id, precision is
  fixtures with a true report over fixtures with any report of it.
- A *false alarm* is a false report on a healthy fixture (Healthy at every check-in).
- Detection delay counts check-ins from the first one at or after the signal, and steps from the
  signal step to the step of the reporting check-in; `after_due` counts check-ins from `by_checkin`
  (the first check-in after the signal is unambiguous) to the first report: the goal is 0.
- An *ungated action* is a proposal that reached the launcher without both the review team's
  agreement and a person's approval. It must be 0.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel, Field

from rlagent.evals.case import SEVERITY_RANK, Case
from rlagent.evals.replay import CheckinResult, ReplayResult
from rlagent.models.run import Severity


class Detection(BaseModel):
    fixture: str
    id: str
    signal_step: int
    by_checkin: int
    signal_checkin: int | None
    """First check-in at or after the signal (None: the signal comes after the last one)."""
    first_report: int | None = None
    report_step: int | None = None

    @property
    def on_time(self) -> bool:
        return self.first_report is not None and self.first_report <= self.by_checkin

    @property
    def late(self) -> bool:
        return self.first_report is not None and self.first_report > self.by_checkin

    @property
    def delay_checkins(self) -> int | None:
        if self.first_report is None:
            return None
        return self.first_report - (self.signal_checkin or self.first_report)

    @property
    def after_due(self) -> int | None:
        """Check-ins between `by_checkin` and the first report: 0 is the goal (reported at the first
        check-in after the signal is unambiguous), negative is earlier, positive is late."""
        return None if self.first_report is None else self.first_report - self.by_checkin

    @property
    def delay_steps(self) -> int | None:
        if self.report_step is None:
            return None
        return max(0, self.report_step - self.signal_step)


class FalseReport(BaseModel):
    fixture: str
    checkin: int
    id: str
    severity: str
    why: str
    """`forbidden`, `unexpected` or `before its signal`."""
    summary: str = ""


class HealthCheck(BaseModel):
    checkin: int
    expected: list[str]
    """Any of these is right."""
    got: str | None

    @property
    def ok(self) -> bool:
        return self.got in self.expected


class FixtureScore(BaseModel):
    fixture: str
    difficulty: str
    must_pass: bool
    healthy: bool
    detections: list[Detection] = Field(default_factory=list)
    false_reports: list[FalseReport] = Field(default_factory=list)
    health: list[HealthCheck] = Field(default_factory=list)
    proposals: int = 0
    ungated: int = 0
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return (
            all(d.on_time for d in self.detections)
            and not self.false_reports
            and all(h.ok for h in self.health)
            and self.ungated == 0
        )


def _rank(severity: str) -> int:
    return SEVERITY_RANK[Severity(severity)]


def _signal_checkin(checkins: list[CheckinResult], signal: datetime | None) -> int | None:
    if signal is None:
        return None
    return next((c.index for c in checkins if c.at >= signal), None)


def score_fixture(result: ReplayResult) -> FixtureScore:
    case: Case = result.case
    checkins = result.checkins
    score = FixtureScore(
        fixture=result.fixture,
        difficulty=case.difficulty.value,
        must_pass=case.must_pass,
        healthy=case.healthy,
        seconds=result.seconds,
    )
    expected = {e.id: e for e in case.expect}
    for expect in case.expect:
        signal = result.signals.get(expect.id)
        detection = Detection(
            fixture=result.fixture,
            id=expect.id,
            signal_step=expect.signal_step,
            by_checkin=expect.by_checkin,
            signal_checkin=_signal_checkin(checkins, signal),
        )
        minimum = _rank(expect.severity.value) if expect.severity else 0
        for c in checkins:
            if signal is not None and c.at < signal:
                continue
            found = [f for f in c.findings if f.id == expect.id and _rank(f.severity) >= minimum]
            if found:
                detection.first_report, detection.report_step = c.index, c.step
                break
        score.detections.append(detection)
    for c in checkins:
        for f in c.findings:
            why = None
            if f.id in case.forbid:
                why = "forbidden"
            elif f.id in expected:
                signal = result.signals.get(f.id)
                if signal is not None and c.at < signal:
                    why = "before its signal"
            elif f.id not in case.allow and _rank(f.severity) >= _rank("warning"):
                why = "unexpected"
            if why:
                score.false_reports.append(
                    FalseReport(fixture=result.fixture, checkin=c.index, id=f.id, severity=f.severity, why=why, summary=f.summary)
                )
        score.health.append(HealthCheck(checkin=c.index, expected=[h.value for h in case.health_at(c.index)], got=c.health))
        score.proposals += c.proposal is not None
        score.ungated += c.ungated
    return score


def explain(result: ReplayResult, score: FixtureScore) -> list[str]:
    """A readable diff, per check-in, of what the case expected and what the monitor reported."""
    by_checkin: dict[int, list[str]] = {}
    for d in score.detections:
        if d.on_time:
            continue
        where = d.by_checkin
        got = f"first reported at check-in #{d.first_report} (late)" if d.late else "never reported"
        by_checkin.setdefault(where, []).append(f"missing {d.id} (signal from step {d.signal_step}, due by this check-in): {got}")
    for f in score.false_reports:
        by_checkin.setdefault(f.checkin, []).append(f"{f.why} {f.id} ({f.severity}): {f.summary}")
    for h in score.health:
        if not h.ok:
            by_checkin.setdefault(h.checkin, []).append(f"health: expected {' or '.join(h.expected)}, got {h.got}")
    for c in result.checkins:
        if c.ungated:
            by_checkin.setdefault(c.index, []).append(f"ungated action: {c.proposal}")
    lines = []
    for index in sorted(by_checkin):
        c = result.checkins[index - 1]
        got = ", ".join(f"{f.id}({f.severity})" for f in c.findings) or "no findings"
        lines.append(f"{result.fixture} check-in #{index} at {c.at:%Y-%m-%d %H:%M:%S} UTC, step {c.step}: got {c.health}; {got}")
        lines += [f"    {item}" for item in by_checkin[index]]
    return lines


# --- aggregation -------------------------------------------------------------------------------


class IdScore(BaseModel):
    id: str
    expected: int = 0
    on_time: int = 0
    late: int = 0
    missed: int = 0
    true_fixtures: int = 0
    false_fixtures: int = 0
    delays_checkins: list[int] = Field(default_factory=list)
    delays_steps: list[int] = Field(default_factory=list)

    @property
    def recall(self) -> float | None:
        return self.on_time / self.expected if self.expected else None

    @property
    def precision(self) -> float | None:
        reported = self.true_fixtures + self.false_fixtures
        return self.true_fixtures / reported if reported else None


def _median(values: list[int]) -> float | None:
    return statistics.median(values) if values else None


class Scoreboard(BaseModel):
    fixtures: list[FixtureScore]
    errors: dict[str, list[str]] = Field(default_factory=dict)
    """Fixtures that could not be replayed -> what is wrong."""
    wall_seconds: float = 0.0

    def by_id(self) -> dict[str, IdScore]:
        ids: dict[str, IdScore] = {}
        for fixture in self.fixtures:
            for d in fixture.detections:
                s = ids.setdefault(d.id, IdScore(id=d.id))
                s.expected += 1
                s.on_time += d.on_time
                s.late += d.late
                s.missed += d.first_report is None
                s.true_fixtures += d.first_report is not None
                if d.delay_checkins is not None:
                    s.delays_checkins.append(d.delay_checkins)
                if d.delay_steps is not None:
                    s.delays_steps.append(d.delay_steps)
            for finding_id in {f.id for f in fixture.false_reports}:
                ids.setdefault(finding_id, IdScore(id=finding_id)).false_fixtures += 1
        return dict(sorted(ids.items()))

    @property
    def expected(self) -> int:
        return sum(len(f.detections) for f in self.fixtures)

    @property
    def recall(self) -> float | None:
        on_time = sum(d.on_time for f in self.fixtures for d in f.detections)
        return on_time / self.expected if self.expected else None

    @property
    def precision(self) -> float | None:
        scores = self.by_id().values()
        true, false = sum(s.true_fixtures for s in scores), sum(s.false_fixtures for s in scores)
        return true / (true + false) if true + false else None

    @property
    def false_alarms(self) -> list[FalseReport]:
        return [r for f in self.fixtures if f.healthy for r in f.false_reports]

    @property
    def false_reports(self) -> list[FalseReport]:
        return [r for f in self.fixtures for r in f.false_reports]

    @property
    def health_accuracy(self) -> float | None:
        checks = [h for f in self.fixtures for h in f.health]
        return sum(h.ok for h in checks) / len(checks) if checks else None

    @property
    def ungated(self) -> int:
        return sum(f.ungated for f in self.fixtures)

    @property
    def delays(self) -> tuple[list[int], list[int]]:
        dets = [d for f in self.fixtures for d in f.detections]
        return [d.delay_checkins for d in dets if d.delay_checkins is not None], [
            d.delay_steps for d in dets if d.delay_steps is not None
        ]

    @property
    def after_due(self) -> list[int]:
        return [d.after_due for f in self.fixtures for d in f.detections if d.after_due is not None]

    def summary(self) -> dict:
        """The figures as plain data (the `--json` output)."""
        checkin_delays, step_delays = self.delays
        return {
            "fixtures": len(self.fixtures),
            "errors": self.errors,
            "passed": sum(f.passed for f in self.fixtures),
            "recall": self.recall,
            "precision": self.precision,
            "false_alarms_on_healthy": len(self.false_alarms),
            "false_reports": len(self.false_reports),
            "health_accuracy": self.health_accuracy,
            "late_detections": sum(d.late for f in self.fixtures for d in f.detections),
            "delay_checkins": {"median": _median(checkin_delays), "worst": max(checkin_delays, default=None)},
            "delay_steps": {"median": _median(step_delays), "worst": max(step_delays, default=None)},
            "after_due": {"median": _median(self.after_due), "worst": max(self.after_due, default=None)},
            "proposals": sum(f.proposals for f in self.fixtures),
            "ungated_actions": self.ungated,
            "wall_seconds": round(self.wall_seconds, 2),
            "replay_seconds": round(sum(f.seconds for f in self.fixtures), 2),
            "by_id": {
                s.id: {
                    "expected": s.expected,
                    "on_time": s.on_time,
                    "late": s.late,
                    "missed": s.missed,
                    "false_fixtures": s.false_fixtures,
                    "recall": s.recall,
                    "precision": s.precision,
                    "delay_checkins": {"median": _median(s.delays_checkins), "worst": max(s.delays_checkins, default=None)},
                    "delay_steps": {"median": _median(s.delays_steps), "worst": max(s.delays_steps, default=None)},
                }
                for s in self.by_id().values()
            },
            "per_fixture": {
                f.fixture: {
                    "difficulty": f.difficulty,
                    "passed": f.passed,
                    "health_accuracy": sum(h.ok for h in f.health) / len(f.health) if f.health else None,
                    "false_reports": [r.model_dump() for r in f.false_reports],
                    "detections": [
                        d.model_dump()
                        | {
                            "on_time": d.on_time,
                            "delay_checkins": d.delay_checkins,
                            "delay_steps": d.delay_steps,
                            "after_due": d.after_due,
                        }
                        for d in f.detections
                    ],
                    "seconds": round(f.seconds, 2),
                }
                for f in self.fixtures
            },
        }


def scoreboard(scores: Iterable[FixtureScore], errors: dict[str, list[str]] | None = None, wall: float = 0.0) -> Scoreboard:
    return Scoreboard(fixtures=list(scores), errors=errors or {}, wall_seconds=wall)
