"""`case.toml`: what a fixture (a simulated run) expects from the monitor, as a validated model.

A fixture is a folder (conventions.md item 11): the simulated run in `run/`, the mtimes git
cannot keep in `manifest.json`, and this file. It says when the check-ins happen (absolute UTC
times, or "when the trainer logged step N", or "the end of the recording", each with an optional
offset), which findings must be reported (from which step the signal starts, by which check-in
at the latest), which must never appear, and the health expected at every check-in.

Check-ins are numbered from 1 in time order, as the monitor numbers them. Errors name the key
and say what is wrong, so a hand-written case is fixed from one message.
"""

from __future__ import annotations

import difflib
import tomllib
from enum import StrEnum
from pathlib import Path
from typing import Literal, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rlagent.agents.rules import catalogue
from rlagent.models.run import Health, Layout, Severity
from rlagent.tools.safefs import read_regular, reason

MAX_CASE_BYTES = 1 << 20
"""A case.toml is a page of TOML; a longer one is not read."""

FINDING_IDS: frozenset[str] = frozenset(catalogue.FINDING_IDS)
"""The public finding ids of reference/findings.md (a typo in a case must not silently pass)."""

SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


class CaseError(Exception):
    """A case.toml that cannot be used; the message says which key and what is wrong."""


class Difficulty(StrEnum):
    EASY = "easy"
    MEDIUM = "medium"
    HARD = "hard"


MUST_PASS = frozenset({Difficulty.EASY, Difficulty.MEDIUM})
"""The tier CI gates on."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _known_id(value: str) -> str:
    if value not in FINDING_IDS:
        close = difflib.get_close_matches(value, FINDING_IDS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown finding id {value!r}{hint}")
    return value


class CheckinAt(_Strict):
    """When one check-in happens: exactly one anchor, plus an optional offset.

    `step = N` is the moment the trainer logged step N (one second after its step line, so the
    step's metrics rows are in), the way a researcher says "at step 40"; `end = true` is the
    newest line of the recording; `at` is an absolute UTC time.
    """

    at: AwareDatetime | None = None
    step: int | None = Field(None, ge=0)
    end: bool = False
    offset_s: float = 0.0
    """Seconds added to the anchor (e.g. a check-in 20 min after the recording ends)."""

    @model_validator(mode="after")
    def _one_anchor(self) -> Self:
        given = {"at": self.at is not None, "step": self.step is not None, "end": self.end}
        anchors = [name for name, present in given.items() if present]
        if len(anchors) != 1:
            raise ValueError(f"give exactly one of at, step, end = true (got {', '.join(anchors) or 'none'})")
        return self

    def describe(self) -> str:
        base = self.at.isoformat() if self.at else f"step {self.step}" if self.step is not None else "end"
        return base + (f" {self.offset_s:+g}s" if self.offset_s else "")


class Expect(_Strict):
    """A finding that must be reported."""

    id: str
    signal_step: int = Field(ge=0)
    """The step where the signal starts in the run's data (the failure's onset)."""
    by_checkin: int = Field(ge=1)
    """The latest check-in (1-based) that must report it: the first one after the signal is
    unambiguous by findings.md's thresholds. Earlier is fine, later is a miss."""
    severity: Severity | None = None
    """Minimum severity the report needs (e.g. `critical` for a crash); any when unset."""
    why: str = ""
    """What the signal looks like, for the person reading a failure."""

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return _known_id(value)


class HealthPhase(_Strict):
    """The health expected at every check-in up to and including `until_checkin` (from the
    previous phase's end); the last phase may leave it out to run to the last check-in.

    A list accepts any of its values: between a signal's start and the moment it is
    unambiguous, both `Healthy` and `Degraded` are right answers.
    """

    health: Health | list[Health]
    until_checkin: int | None = Field(None, ge=1)

    @field_validator("health")
    @classmethod
    def _not_empty(cls, value: Health | list[Health]) -> Health | list[Health]:
        if isinstance(value, list) and not value:
            raise ValueError("an empty list accepts no health")
        return value

    @property
    def accepted(self) -> tuple[Health, ...]:
        return tuple(self.health) if isinstance(self.health, list) else (self.health,)


class Case(_Strict):
    """One fixture's expectations (the schema of case.toml)."""

    title: str = Field(min_length=1)
    layout: Layout | None = None
    """prime-rl's on-disk layout (H or L); None for the frameworks that have no such thing."""
    framework: Literal["prime-rl", "verl", "trl", "openrlhf"] = "prime-rl"
    """The framework whose run the fixture holds (SIMULATED verl/TRL/OpenRLHF runs say so)."""
    difficulty: Difficulty
    description: str = ""
    log_timezone: str = "UTC"
    """IANA zone the run's logs were written in (the monitor gets it as `log_timezone`)."""
    checkins: list[CheckinAt] = Field(min_length=1)
    expect: list[Expect] = Field(default_factory=list)
    allow: list[str] = Field(default_factory=list)
    """Ids that may be reported (at any severity) without counting as false alarms: honest side
    effects of the failure (a collapse also zeroes the advantage)."""
    forbid: list[str] = Field(default_factory=list)
    """Ids that must never be reported, at any severity (the alarming-but-normal lines)."""
    health: list[HealthPhase] = Field(min_length=1)

    @field_validator("allow", "forbid")
    @classmethod
    def _ids(cls, values: list[str]) -> list[str]:
        for value in values:
            _known_id(value)
        return values

    @field_validator("log_timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        n = len(self.checkins)
        if (self.layout is None) != (self.framework != "prime-rl"):
            raise ValueError("layout (H or L) is given for a prime-rl run, and only for it")
        for i, e in enumerate(self.expect):
            if e.by_checkin > n:
                raise ValueError(f"expect[{i}] ({e.id}): by_checkin = {e.by_checkin} but there are only {n} check-ins")
            if e.id in self.forbid:
                raise ValueError(f"{e.id} is both expected and forbidden")
        ids = [e.id for e in self.expect]
        if len(set(ids)) != len(ids):
            raise ValueError(f"an id is expected twice: {sorted(i for i in ids if ids.count(i) > 1)[0]}")
        if set(self.allow) & set(self.forbid):
            raise ValueError(f"{sorted(set(self.allow) & set(self.forbid))[0]} is both allowed and forbidden")
        previous = 0
        for i, phase in enumerate(self.health):
            last = i == len(self.health) - 1
            if phase.until_checkin is None and not last:
                raise ValueError(f"health[{i}]: only the last phase may leave out until_checkin")
            end = n if phase.until_checkin is None else phase.until_checkin
            if end <= previous:
                raise ValueError(f"health[{i}]: until_checkin = {end} does not come after the previous phase ({previous})")
            if end > n:
                raise ValueError(f"health[{i}]: until_checkin = {end} but there are only {n} check-ins")
            previous = end
        if previous != n:
            raise ValueError(f"health phases cover check-ins 1..{previous}, not all {n}")
        return self

    # --- derived -----------------------------------------------------------------------------

    @property
    def must_pass(self) -> bool:
        return self.difficulty in MUST_PASS

    @property
    def healthy(self) -> bool:
        """A run that is fine throughout (possibly alarming-looking): any warning is a false alarm."""
        return all(p.accepted == (Health.HEALTHY,) for p in self.health)

    def health_at(self, checkin: int) -> tuple[Health, ...]:
        """The healths accepted at check-in `checkin` (1-based)."""
        for phase in self.health:
            if phase.until_checkin is None or checkin <= phase.until_checkin:
                return phase.accepted
        raise IndexError(checkin)

    def expected(self, finding_id: str) -> Expect | None:
        return next((e for e in self.expect if e.id == finding_id), None)


def parse_case(text: str, source: str = "case.toml") -> Case:
    """Parse and validate case.toml text; every problem is listed in one CaseError."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CaseError(f"{source}: malformed TOML ({exc})") from exc
    try:
        return Case.model_validate(data)
    except ValidationError as exc:
        raise CaseError(f"{source}: " + "; ".join(_error_line(err) for err in exc.errors())) from exc


def load_case(path: Path) -> Case:
    try:
        text = read_regular(path, limit=MAX_CASE_BYTES).decode("utf-8")  # a FIFO or /dev/zero: refused, not waited on
    except FileNotFoundError as exc:
        raise CaseError(f"{path.name}: missing") from exc
    except OSError as exc:
        raise CaseError(f"{path.name}: unreadable ({reason(exc)})") from exc
    except UnicodeDecodeError as exc:
        raise CaseError(f"{path.name}: unreadable ({exc})") from exc
    return parse_case(text, path.name)


def _error_line(err: dict) -> str:
    where = ".".join(str(part) for part in err["loc"])
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown key"
    elif err["type"] == "missing":
        message = "required key missing"
    return f"{where}: {message}" if where else message
