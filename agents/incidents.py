"""Incidents from findings, and what to notify about them: pure functions, no I/O.

- An incident opens on the first check-in that reports a finding id at warning or critical, stays
  open while check-ins keep reporting it (its summary and worst severity follow), and resolves on
  the first check-in that does not. Info findings (a finished run, a flat reward) are not incidents.
- Notifications are decided from each incident's own state (level-triggered), grouped into one
  notice per run: its opening once, a reminder every `remind_after_s` while it stays open and
  nobody acknowledged it, its resolution once (only when its opening was announced). A silenced
  incident produces nothing; one that resolves under a silence is closed quietly; one still open
  when its silence ends is announced then.
"""

from __future__ import annotations

from datetime import datetime

from rlagent.models.findings import Finding
from rlagent.models.fleet import RunSummary
from rlagent.models.incidents import Incident, IncidentStatus, Notice, NoticeItem, Silence
from rlagent.models.run import Severity

_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


def is_incident(finding: Finding) -> bool:
    return finding.severity is not Severity.INFO


def track(
    open_incidents: dict[str, Incident], findings: list[Finding], *, checkin: int, at: datetime, step: int | None
) -> list[Incident]:
    """The incidents this check-in changed: opened, continued (summary, severity, last step) or resolved."""
    changed: list[Incident] = []
    reported: dict[str, Finding] = {}
    for finding in findings:
        if is_incident(finding) and finding.id not in reported:
            reported[finding.id] = finding
    for fid, finding in reported.items():
        current = open_incidents.get(fid)
        if current is None:
            changed.append(
                Incident(
                    finding_id=fid,
                    severity=finding.severity,
                    summary=finding.summary,
                    opened_at=at,
                    opened_checkin=checkin,
                    first_step=finding.first_step if finding.first_step is not None else step,
                    last_checkin=checkin,
                    last_step=finding.last_step if finding.last_step is not None else step,
                )
            )
        else:
            worst = max(current.severity, finding.severity, key=_RANK.__getitem__)
            changed.append(
                current.model_copy(
                    update={
                        "severity": worst,
                        "summary": finding.summary,
                        "last_checkin": checkin,
                        "last_step": finding.last_step if finding.last_step is not None else step,
                    }
                )
            )
    for fid, incident in open_incidents.items():
        if fid not in reported:
            changed.append(
                incident.model_copy(
                    update={
                        "status": IncidentStatus.RESOLVED,
                        "resolved_at": at,
                        "resolved_checkin": checkin,
                        "resolved_step": step,
                    }
                )
            )
    return changed


def compose(
    summary: RunSummary,
    open_incidents: list[Incident],
    resolved_unannounced: list[Incident],
    silences: list[Silence],
    *,
    now: datetime,
    remind_after_s: float,
    finished: bool = False,
) -> tuple[Notice | None, list[Incident]]:
    """The run's notice (None when there is nothing to say) and the incidents whose notification
    state it changed (to be saved together with queueing the notice)."""
    items: list[NoticeItem] = []
    changed: list[Incident] = []

    def silenced(incident: Incident) -> bool:
        return any(s.covers(incident.finding_id, now) for s in silences)

    def item(kind, incident: Incident) -> NoticeItem:
        return NoticeItem(
            kind=kind,
            finding_id=incident.finding_id,
            severity=incident.severity,
            summary=incident.summary,
            since=incident.opened_at,
            step=incident.resolved_step if kind == "resolved" else incident.last_step,
        )

    for incident in open_incidents:
        if silenced(incident):
            continue
        if not incident.announced_open:
            items.append(item("opened", incident))
            changed.append(incident.model_copy(update={"announced_open": True, "last_announced": now}))
        elif (
            incident.acked_by is None
            and incident.last_announced is not None
            and (now - incident.last_announced).total_seconds() >= remind_after_s
        ):
            items.append(item("reminder", incident))
            changed.append(incident.model_copy(update={"last_announced": now, "reminders": incident.reminders + 1}))
    for incident in resolved_unannounced:
        if incident.announced_open and not silenced(incident):
            items.append(item("resolved", incident))
        changed.append(incident.model_copy(update={"announced_resolved": True}))
    if not items and not finished:
        return None, changed
    notice = Notice(
        run=summary.name,
        run_dir=summary.run_dir,
        health=summary.health,
        step=summary.step,
        max_steps=summary.max_steps,
        checkin=summary.checkin,
        items=items,
        finished=finished,
        created_at=now,
    )
    return notice, changed
