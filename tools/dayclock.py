"""Give dates to log times that have none.

prime-rl logs `HH:MM:SS` in local time with no date. Walking a file in order, a time that
goes backwards by more than 12 h means midnight passed. The first read of a file is anchored
at its modification time (its last line was written then); later reads continue from the
date of the last line seen, and re-anchor if the file was silent for a day or more.

A run copied without its modification times (`scp -r`, `git clone`, an unpacked archive) has
every file's mtime at the copy's time, which says nothing about the day of its lines: anchored
file by file, the files whose newest line is later in the day than the copy went to the day
before and the others did not, and the run's processes looked a day apart (the bundled example,
checked between 10:05 and 10:38 UTC, had a trainer stalled for 23 h). `shared_anchor` gives such
files one anchor instead (see there).
"""

from __future__ import annotations

from collections.abc import Callable
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
    clock = DayClock(previous, tz)
    moments = [(line_no, clock.moment(seconds)) for line_no, seconds in points]
    to_time = clock.resolver(mtime)
    return {line_no: to_time(moment) for line_no, moment in moments}


PENDING = -1
"""The moment of a junk time before any real one: it takes the first real one's date."""


class DayClock:
    """`date_points` as a stream, for reads too long to hold their lines: feed the seconds of day of
    the points in line order and get each a moment at once (days since the read's first day x 86400
    + seconds); once the read is done, `resolver` turns moments into dates, anchored as
    `date_points` anchors them (the previous read's date, else the file's mtime)."""

    def __init__(self, previous: datetime | None, tz: tzinfo) -> None:
        self.previous, self.tz = previous, tz
        self._last = None if previous is None else _seconds(previous.astimezone(tz))
        self._day = 0
        self.fed = False
        self.first: int | None = None
        self.newest: int | None = None
        """Moment of the newest real time of day fed."""

    def moment(self, seconds: int) -> int:
        self.fed = True
        if not 0 <= seconds < 86400:  # junk: the real one before it (PENDING if none yet)
            return PENDING if self.newest is None else self.newest
        if self._last is not None and seconds < self._last - _HALF_DAY:
            self._day += 1  # more than 12 h backwards: midnight passed
        self._last = seconds
        self.newest = self._day * 86400 + seconds
        if self.first is None:
            self.first = self.newest
        return self.newest

    def resolver(self, mtime: float) -> Callable[[int], datetime]:
        """moment -> aware UTC datetime, once every point of the read was fed."""
        tz, mtime = self.tz, clamp_time(mtime)
        if self.newest is None:  # no real time at all
            fallback = self.previous or datetime.fromtimestamp(mtime, UTC)
            return lambda _moment: fallback
        newest_day, newest_seconds = divmod(self.newest, 86400)
        base = None
        if self.previous is not None:
            base = self.previous.astimezone(tz).date()
            if datetime.fromtimestamp(mtime, UTC) - _at(base, self.newest, tz) >= timedelta(hours=20):
                base = None  # silent for a day or more: re-anchor
        if base is None:  # the newest point was written at or shortly before the file's mtime
            modified = datetime.fromtimestamp(mtime, tz)
            newest_date = modified.date()
            if newest_seconds > _seconds(modified) + 120:
                newest_date -= timedelta(days=1)
            base = newest_date - timedelta(days=newest_day)
        first = self.first
        assert first is not None

        def to_time(moment: int) -> datetime:
            return _at(base, first if moment == PENDING else moment, tz)

        return to_time


WRITTEN_AT_MTIME_S = 120
"""A file whose newest dated line is within this of its mtime (either way: clocks drift) was last
written then: a logging process writes its newest line and the file's mtime together."""


def shared_anchor(newest: list[tuple[int, float]], tz: tzinfo) -> float | None:
    """One anchor (a timestamp) for the first reads of a run's logs, given each file's (seconds of
    day of its newest dated line, mtime); None when the mtimes do: when any file was last written
    when its newest line says (within `WRITTEN_AT_MTIME_S`), as every file of a running run is and
    a process that died keeps, or there are fewer than two.

    Otherwise the mtimes are a copy's, and the files' newest times of day are read as the end of one
    stretch of activity: on the 24 h clock they leave one largest gap, and the stretch ends at the
    time just before it. The anchor is the last such time at or before the newest mtime, so that each
    file's newest line is dated within the day before the anchor, all of them consistently (a stretch
    across midnight included)."""
    if len(newest) < 2:
        return None
    for seconds, mtime in newest:
        modified = datetime.fromtimestamp(clamp_time(mtime), tz)
        since = (_seconds(modified) - seconds) % 86400  # mtime - newest line, as anchoring on the mtime dates it
        if since <= WRITTEN_AT_MTIME_S or since >= 86400 - WRITTEN_AT_MTIME_S:
            return None
    times = sorted({seconds for seconds, _ in newest})
    gaps = [((times[(i + 1) % len(times)] - t) % 86400 or 86400, t) for i, t in enumerate(times)]
    end = max(gaps)[1]  # the time before the largest gap
    latest = datetime.fromtimestamp(clamp_time(max(mtime for _, mtime in newest)), tz)
    day = latest.date() if end <= _seconds(latest) else latest.date() - timedelta(days=1)
    return _at(day, end, tz).timestamp()


def _at(base: date, moment: int, tz: tzinfo) -> datetime:
    day, seconds = divmod(moment, 86400)
    local = datetime.combine(base + timedelta(days=day), time(seconds // 3600, seconds // 60 % 60, seconds % 60))
    return local.replace(tzinfo=tz).astimezone(UTC)


def _seconds(moment: datetime) -> int:
    return moment.hour * 3600 + moment.minute * 60 + moment.second
