"""Give dates to log times that have none.

prime-rl logs `HH:MM:SS` in local time with no date. Walking a file in order, a time that
goes backwards by more than 12 h means midnight passed. The first read of a file is anchored
at its modification time (its last line was written then); later reads continue from the
date of the last line seen, and re-anchor if the file was silent for a day or more.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, tzinfo

from rlagent.tools.bounds import clamp_time

_HALF_DAY = 12 * 3600


def local_tz() -> tzinfo:
    tz = datetime.now().astimezone().tzinfo
    assert tz is not None
    return tz


def date_points(
    points: list[tuple[int, int]],
    *,
    previous: datetime | None,
    mtime: float,
    tz: tzinfo,
) -> dict[int, datetime]:
    """Map (line_no, local seconds of day) points, in line order, to aware UTC datetimes.

    A point that is no time of day (`99:99:99` in junk) takes the date of the real one before it
    (or after it, or the previous read's last), so it neither breaks nor moves the dating; a junk
    mtime is clamped."""
    mtime = clamp_time(mtime)
    valid = [p for p in points if 0 <= p[1] < 86400]
    dated = _date_valid(valid, previous=previous, mtime=mtime, tz=tz) if valid else {}
    if len(valid) == len(points):
        return dated
    nearest = dated[valid[0][0]] if valid else previous or datetime.fromtimestamp(mtime, UTC)
    out: dict[int, datetime] = {}
    for line_no, _ in points:
        nearest = dated.get(line_no, nearest)
        out[line_no] = nearest
    return out


def _date_valid(
    points: list[tuple[int, int]],
    *,
    previous: datetime | None,
    mtime: float,
    tz: tzinfo,
) -> dict[int, datetime]:
    day_index: list[int] = []
    day = 0
    last = None if previous is None else _seconds(previous.astimezone(tz))
    for _, seconds in points:
        if last is not None and seconds < last - _HALF_DAY:
            day += 1
        day_index.append(day)
        last = seconds
    if previous is not None:
        base = previous.astimezone(tz).date()
        dated = _build(points, day_index, base, tz)
        newest = dated[points[-1][0]]
        if datetime.fromtimestamp(mtime, UTC) - newest < timedelta(hours=20):
            return dated
    # Anchor: the newest point was written at or shortly before the file's mtime.
    modified = datetime.fromtimestamp(mtime, tz)
    newest_date = modified.date()
    if points[-1][1] > _seconds(modified) + 120:
        newest_date -= timedelta(days=1)
    base = newest_date - timedelta(days=day_index[-1])
    return _build(points, day_index, base, tz)


def _build(points: list[tuple[int, int]], day_index: list[int], base: date, tz: tzinfo) -> dict[int, datetime]:
    out: dict[int, datetime] = {}
    for (line_no, seconds), day in zip(points, day_index, strict=True):
        local = datetime.combine(base + timedelta(days=day), time(seconds // 3600, seconds // 60 % 60, seconds % 60))
        out[line_no] = local.replace(tzinfo=tz).astimezone(UTC)
    return out


def _seconds(moment: datetime) -> int:
    return moment.hour * 3600 + moment.minute * 60 + moment.second
