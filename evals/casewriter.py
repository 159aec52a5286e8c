"""Write a `Case` as case.toml text (the standard library reads TOML but does not write it).

The output is meant for people: keys in schema order, check-ins one per line, times as TOML
datetimes, a header saying where the file comes from. `parse_case(render_case(c)) == c`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from rlagent.evals.case import Case, CheckinAt


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime):
        text = value.astimezone(UTC).isoformat()
        return text.replace("+00:00", "Z")
    if isinstance(value, str):
        if "\n" in value:
            return '"""\n' + value.replace("\\", "\\\\").replace('"""', '\\"""') + '"""'
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def _checkin(c: CheckinAt) -> str:
    parts = []
    if c.at is not None:
        parts.append(f"at = {_value(c.at)}")
    if c.step is not None:
        parts.append(f"step = {c.step}")
    if c.end:
        parts.append("end = true")
    if c.offset_s:
        parts.append(f"offset_s = {_value(c.offset_s)}")
    return "{ " + ", ".join(parts) + " }"


def render_case(case: Case, header: str = "") -> str:
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for key in ("title", "layout", "difficulty", "log_timezone"):
        value = getattr(case, key)
        lines.append(f"{key} = {_value(getattr(value, 'value', value))}")
    if case.description:
        lines.append(f"description = {_value(case.description)}")
    lines.append(f"allow = {_value(case.allow)}")
    lines.append(f"forbid = {_value(case.forbid)}")
    lines.append("")
    lines.append("# Check-ins, numbered from 1 in this order. `step = N`: when the trainer logged step N.")
    lines.append("checkins = [")
    lines += [f"    {_checkin(c)},  # {i}" for i, c in enumerate(case.checkins, start=1)]
    lines.append("]")
    for e in case.expect:
        lines += ["", "[[expect]]", f"id = {_value(e.id)}", f"signal_step = {e.signal_step}", f"by_checkin = {e.by_checkin}"]
        if e.severity is not None:
            lines.append(f"severity = {_value(e.severity.value)}")
        if e.why:
            lines.append(f"why = {_value(e.why)}")
    for phase in case.health:
        lines += ["", "[[health]]"]
        health = [h.value for h in phase.health] if isinstance(phase.health, list) else phase.health.value
        lines.append(f"health = {_value(health)}")
        if phase.until_checkin is not None:
            lines.append(f"until_checkin = {phase.until_checkin}")
    return "\n".join(lines) + "\n"
