"""Incidents and notification decisions (agents/incidents.py), on findings as the rules give them."""

from datetime import UTC, datetime, timedelta

from rlagent.agents.incidents import compose, track
from rlagent.graph.adaptive import WatchSettings, fast_cadence, interval
from rlagent.models.findings import Finding
from rlagent.models.fleet import RunSummary
from rlagent.models.incidents import IncidentStatus, Silence
from rlagent.models.run import Category, Severity

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SUMMARY = RunSummary(run_dir="/runs/a", name="a", health="Down", step=10, max_steps=100, checkin=1)


def finding(fid: str, severity: Severity = Severity.CRITICAL, step: int = 10) -> Finding:
    return Finding(id=fid, severity=severity, category=Category.HEALTH, summary=f"{fid} at step {step}", first_step=step)


def apply(book: dict, changed: list) -> dict:
    """The open incidents after saving `changed` (as the state store does)."""
    for inc in changed:
        if inc.status is IncidentStatus.OPEN:
            book[inc.finding_id] = inc
        else:
            book.pop(inc.finding_id, None)
    return book


def test_an_incident_opens_once_follows_the_finding_and_resolves_when_it_is_gone():
    book: dict = {}
    first = track(book, [finding("run_crashed"), finding("reward_flat", Severity.INFO)], checkin=1, at=T0, step=10)
    assert [(i.finding_id, i.status) for i in first] == [("run_crashed", IncidentStatus.OPEN)]  # info is no incident
    apply(book, first)
    second = track(book, [finding("run_crashed", step=12)], checkin=2, at=T0 + timedelta(hours=1), step=12)
    assert len(second) == 1 and second[0].opened_checkin == 1 and second[0].last_checkin == 2 and second[0].last_step == 12
    apply(book, second)
    third = track(book, [], checkin=3, at=T0 + timedelta(hours=2), step=20)
    assert third[0].status is IncidentStatus.RESOLVED and (third[0].resolved_checkin, third[0].resolved_step) == (3, 20)
    assert third[0].first_step == 10 and third[0].opened_at == T0


def test_severity_only_escalates():
    book = apply({}, track({}, [finding("truncation_high", Severity.CRITICAL)], checkin=1, at=T0, step=5))
    later = track(book, [finding("truncation_high", Severity.WARNING)], checkin=2, at=T0, step=6)
    assert later[0].severity is Severity.CRITICAL


def test_opening_reminder_and_resolution_are_each_said_once():
    book = apply({}, track({}, [finding("run_crashed")], checkin=1, at=T0, step=10))
    notice, changed = compose(SUMMARY, list(book.values()), [], [], now=T0, remind_after_s=3600)
    assert [i.kind for i in notice.items] == ["opened"] and "NEW [critical] run_crashed" in notice.text()
    apply(book, changed)
    # the next round, nothing new: nothing to say
    assert compose(SUMMARY, list(book.values()), [], [], now=T0 + timedelta(minutes=59), remind_after_s=3600)[0] is None
    notice, changed = compose(SUMMARY, list(book.values()), [], [], now=T0 + timedelta(minutes=61), remind_after_s=3600)
    assert [i.kind for i in notice.items] == ["reminder"] and changed[0].reminders == 1
    apply(book, changed)
    assert compose(SUMMARY, list(book.values()), [], [], now=T0 + timedelta(minutes=90), remind_after_s=3600)[0] is None
    resolved = track(book, [], checkin=3, at=T0, step=30)
    notice, changed = compose(SUMMARY, [], resolved, [], now=T0 + timedelta(hours=2), remind_after_s=3600)
    assert [i.kind for i in notice.items] == ["resolved"] and changed[0].announced_resolved
    assert compose(SUMMARY, [], [c for c in changed if not c.announced_resolved], [], now=T0, remind_after_s=1)[0] is None


def test_an_acknowledged_incident_gets_no_reminder_but_its_resolution():
    book = apply({}, track({}, [finding("cuda_oom")], checkin=1, at=T0, step=10))
    _, changed = compose(SUMMARY, list(book.values()), [], [], now=T0, remind_after_s=60)
    acked = changed[0].model_copy(update={"acked_by": "alice"})
    assert compose(SUMMARY, [acked], [], [], now=T0 + timedelta(hours=5), remind_after_s=60)[0] is None
    resolved = track({"cuda_oom": acked}, [], checkin=2, at=T0, step=11)
    notice, _ = compose(SUMMARY, [], resolved, [], now=T0 + timedelta(hours=5), remind_after_s=60)
    assert [i.kind for i in notice.items] == ["resolved"]


def test_a_silenced_incident_says_nothing_until_the_silence_ends():
    silence = Silence(finding_id="nan_detected", until=T0 + timedelta(hours=6), reason="known", by="bob", created_at=T0)
    book = apply({}, track({}, [finding("nan_detected")], checkin=1, at=T0, step=10))
    notice, changed = compose(SUMMARY, list(book.values()), [], [silence], now=T0 + timedelta(hours=1), remind_after_s=60)
    assert notice is None and changed == []
    # still open when the silence ends: announced then
    notice, _ = compose(SUMMARY, list(book.values()), [], [silence], now=T0 + timedelta(hours=7), remind_after_s=60)
    assert [i.kind for i in notice.items] == ["opened"]


def test_a_resolution_under_a_silence_or_never_announced_is_closed_quietly():
    every = Silence(finding_id="*", until=T0 + timedelta(hours=6), reason="maintenance", by="bob", created_at=T0)
    announced = apply({}, track({}, [finding("run_crashed")], checkin=1, at=T0, step=10))["run_crashed"].model_copy(
        update={"announced_open": True, "last_announced": T0}
    )
    resolved = track({"run_crashed": announced}, [], checkin=2, at=T0, step=11)
    notice, changed = compose(SUMMARY, [], resolved, [every], now=T0 + timedelta(hours=1), remind_after_s=60)
    assert notice is None and changed[0].announced_resolved
    quiet = track(apply({}, track({}, [finding("disk_low")], checkin=1, at=T0, step=1)), [], checkin=2, at=T0, step=2)
    notice, changed = compose(SUMMARY, [], quiet, [], now=T0, remind_after_s=60)
    assert notice is None and changed[0].announced_resolved


def test_cadence_is_faster_while_degraded_or_down_but_never_below_the_floor_nor_slower():
    settings = WatchSettings(degraded_factor=0.25, min_cadence="5m")
    assert interval("Healthy", 3600, settings) == 3600
    assert interval("Degraded", 3600, settings) == interval("Down", 3600, settings) == 900
    assert interval(None, 3600, settings) == 900  # a failed check-in is tried again sooner
    assert interval("Healthy", 3600, settings, behind=True) == 900  # a backlog left for the next check-in
    assert fast_cadence(600, settings) == 300  # floored at 5m
    assert fast_cadence(60, settings) == 60  # the floor never makes it slower than the cadence
