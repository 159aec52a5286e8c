"""The real corpus: logs and metric files published by real users, each labelled from its thread.

A case is a folder under `evals/real/`: the input exactly as published (trimmed only) and a
`case.toml` with its provenance (repository, issue, PR or file at a commit, URL), its label
(health, finding ids that must and must not be reported), who established the diagnosis (a
maintainer, the author's own fix, or only what is visible) and what the excerpt cannot show.

These cases were written by nobody on this team, so they are the scoreboard that counts: the
simulated fixtures only show that the rules and the simulator agree with each other.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, ValidationError, field_validator, model_validator

from rlagent.agents.rules import catalogue
from rlagent.evals.case import MAX_CASE_BYTES
from rlagent.models.run import Health
from rlagent.tools.safefs import read_regular

REAL_DIR = Path(__file__).resolve().parent / "real"
FINDING_IDS = frozenset(catalogue.FINDING_IDS)
Framework = Literal["prime-rl", "verl", "trl", "openrlhf"]


class RealCaseError(Exception):
    """A real case that cannot be used; the message names the case and the key."""


class EstablishedBy(StrEnum):
    MAINTAINER = "maintainer"
    AUTHOR_FIX = "author_fix"
    VISIBLE_ONLY = "visible_only"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Provenance(_Strict):
    repo: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    kind: Literal["issue", "pull", "file"]
    number: int | None = None
    path: str = ""
    commit: str = ""
    url: HttpUrl
    retrieved: str
    trimmed: str

    @model_validator(mode="after")
    def _located(self) -> Provenance:
        if self.kind in ("issue", "pull") and self.number is None:
            raise ValueError(f"a {self.kind} needs its number")
        if self.kind == "file" and not self.path:
            raise ValueError("a file needs its path in the repository")
        return self


def _known_ids(ids: list[str]) -> list[str]:
    for value in ids:
        if value not in FINDING_IDS:
            close = difflib.get_close_matches(value, FINDING_IDS, n=1)
            raise ValueError(f"unknown finding id {value!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return ids


class Label(_Strict):
    health: Health
    expect: list[str] = Field(default_factory=list)
    forbid: list[str] = Field(default_factory=list)
    established_by: EstablishedBy
    diagnosis: str = Field(min_length=10)
    cannot_show: str = Field(min_length=5)
    rule_change: str = ""
    """Which rule change this case prompted (and the general reason), if any."""

    _ids = field_validator("expect", "forbid")(_known_ids)


class RealCase(_Strict):
    title: str
    framework: Framework
    source_kind: Literal["excerpt", "log", "metrics_jsonl", "trainer_state", "wandb_csv", "tensorboard"]
    input: str
    provenance: Provenance
    label: Label
    name: str = ""
    dir: Path = Path()

    @property
    def input_path(self) -> Path:
        return self.dir / self.input


def load_case(case_dir: Path) -> RealCase:
    toml = case_dir / "case.toml"
    try:
        data = tomllib.loads(read_regular(toml, limit=MAX_CASE_BYTES).decode("utf-8"))
        case = RealCase.model_validate({**data, "name": case_dir.name, "dir": case_dir})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RealCaseError(f"{case_dir.name}: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RealCaseError(f"{case_dir.name}: case.toml {where}: {first['msg']}") from exc
    if not case.input_path.is_file():
        raise RealCaseError(f"{case_dir.name}: input file {case.input!r} is missing")
    return case


def real_cases(root: Path = REAL_DIR) -> list[RealCase]:
    return [load_case(d) for d in sorted(root.iterdir()) if (d / "case.toml").is_file()] if root.is_dir() else []


@dataclass
class CaseResult:
    case: RealCase
    health: str | None
    reported: set[str]
    error: str | None = None

    @property
    def missed(self) -> set[str]:
        return set(self.case.label.expect) - self.reported

    @property
    def forbidden(self) -> set[str]:
        return set(self.case.label.forbid) & self.reported

    @property
    def ok(self) -> bool:
        """Right verdict, every expected id reported, no forbidden one."""
        return self.error is None and self.health == self.case.label.health.value and not self.missed and not self.forbidden


@dataclass
class RealScoreboard:
    results: list[CaseResult]
    per_framework: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def accuracy(self) -> float:
        return sum(r.ok for r in self.results) / len(self.results) if self.results else 0.0

    @property
    def verdict_accuracy(self) -> float:
        return sum(r.health == r.case.label.health.value for r in self.results) / len(self.results) if self.results else 0.0

    @property
    def healthy_called_down(self) -> list[CaseResult]:
        return [r for r in self.results if r.case.label.health is Health.HEALTHY and r.health == Health.DOWN.value]

    def per_id(self) -> dict[str, dict[str, float | int]]:
        """Recall over the cases that expect an id; precision over the cases that report it and
        whose label speaks about it (expects or forbids it, or is Healthy)."""
        ids = sorted({i for r in self.results for i in (*r.case.label.expect, *r.reported)})
        table: dict[str, dict[str, float | int]] = {}
        for fid in ids:
            expected = [r for r in self.results if fid in r.case.label.expect]
            reported = [r for r in self.results if fid in r.reported]
            judged = [
                r
                for r in reported
                if fid in r.case.label.expect or fid in r.case.label.forbid or r.case.label.health is Health.HEALTHY
            ]
            hits = sum(fid in r.reported for r in expected)
            true_pos = sum(fid in r.case.label.expect for r in judged)
            table[fid] = {
                "expected": len(expected),
                "reported": len(reported),
                "recall": hits / len(expected) if expected else float("nan"),
                "precision": true_pos / len(judged) if judged else float("nan"),
            }
        return table


Diagnose = Callable[[RealCase], tuple[str | None, set[str]]]
"""(health, reported finding ids) of one case's input."""


def score_real(cases: Iterable[RealCase], diagnose: Diagnose) -> RealScoreboard:
    results: list[CaseResult] = []
    for case in cases:
        try:
            health, reported = diagnose(case)
            results.append(CaseResult(case, health, set(reported)))
        except Exception as exc:  # a case that breaks the reader is a failed case, not a crashed eval
            results.append(CaseResult(case, None, set(), error=f"{type(exc).__name__}: {exc}"))
    board = RealScoreboard(results)
    for fw in sorted({r.case.framework for r in results}):
        mine = [r for r in results if r.case.framework == fw]
        board.per_framework[fw] = (sum(r.ok for r in mine), len(mine))
    return board
