"""What Claude may answer: one pydantic model per answer, each doubling as its tool's input schema.

The models are deliberately narrow. Finding ids are the catalogue's (findings.md) and nothing
else; severities an LLM may give are `info` or `warning` (critical findings, which make a run
Down and can justify a restart, come from the rules); an action is one of the closed set of
`ActionKind`s with typed overrides of allow-listed `Knob`s. There is no field in which Claude
could write a command: free text (`why`, `narrative`, `reasons`) is only ever shown to people.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from rlagent.agents.rules.catalogue import CATALOGUE
from rlagent.models.actions import ActionKind, Knob


def _catalogued(value: str) -> str:
    if value not in CATALOGUE:
        raise ValueError(f"{value!r} is not a finding id of the catalogue")
    return value


FindingId = Annotated[
    str, AfterValidator(_catalogued), Field(max_length=32, description="a finding id of the catalogue, e.g. `entropy_collapse`")
]
"""A string in the schema (the catalogue is in the cached system prompt), checked on parse."""
RULES_ONLY = frozenset({"run_crashed", "process_down", "run_stalled", "run_finished"})
"""Whether the run is alive, down or done is read from processes and launcher lines by the rules;
Claude may confirm or dispute these, not add them."""


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- evidence -----------------------------------------------------------------------------


class LogEvidence(_Answer):
    """A log line: file as cited, 1-based line number, words of that line copied exactly."""

    kind: Literal["log"] = "log"
    file: str = Field(max_length=300)
    line: int = Field(ge=1)
    quote: str = Field(min_length=4, max_length=300)

    def cite(self) -> str:
        return f"{self.file}:{self.line}: {self.quote}"


class MetricEvidence(_Answer):
    """A metric value at a step, canonical name as in the tables."""

    kind: Literal["metric"] = "metric"
    process: Literal["trainer", "orchestrator"]
    metric: str = Field(max_length=64)
    step: int = Field(ge=0)
    value: float

    def cite(self) -> str:
        return f"{self.process} {self.metric} @ step {self.step} = {self.value:.4g}"


class SampleEvidence(_Answer):
    """Words of a rollout completion at a step, copied exactly."""

    kind: Literal["sample"] = "sample"
    step: int = Field(ge=0)
    quote: str = Field(min_length=8, max_length=300)

    def cite(self) -> str:
        return f"rollout at step {self.step}: {self.quote}"


Evidence = Annotated[LogEvidence | MetricEvidence | SampleEvidence, Field(discriminator="kind")]


# --- the diagnostician --------------------------------------------------------------------


class RuleCheck(_Answer):
    """Your judgement of one of the rules' findings."""

    id: FindingId
    verdict: Literal["confirm", "reject"]
    why: str = Field(max_length=400)
    evidence: list[Evidence] = Field(default_factory=list, max_length=4)
    """Required to reject: what in the data contradicts the finding."""


class ExtraFinding(_Answer):
    """A condition the rules missed, from the catalogue only, with evidence."""

    id: FindingId
    severity: Literal["info", "warning"]
    summary: str = Field(max_length=240)
    evidence: list[Evidence] = Field(min_length=1, max_length=4)
    first_step: int | None = None
    last_step: int | None = None


class OverrideChoice(_Answer):
    knob: Knob
    value: float


class ActionChoice(_Answer):
    """One action from the closed set; rlagent builds the claim, the checkpoint and the command."""

    action: ActionKind
    addresses: list[FindingId] = Field(min_length=1, max_length=3)
    """Finding ids it addresses, the primary one first."""
    overrides: list[OverrideChoice] = Field(default_factory=list, max_length=3)
    why: str = Field(max_length=400)


class Diagnosis(_Answer):
    """Call report_diagnosis once with your complete diagnosis."""

    rule_findings: list[RuleCheck] = Field(default_factory=list, max_length=24)
    """One entry per rule finding: confirm or reject (with evidence)."""
    extra_findings: list[ExtraFinding] = Field(default_factory=list, max_length=4)
    narrative: str = Field(max_length=900)
    """Two to five sentences for the STATUS.md Notes: what is going on and what to watch."""
    proposal: ActionChoice | None = None
    """At most one action, only when the evidence calls for it; usually none."""


class Revision(_Answer):
    """Call report_revision once: withdraw the rejected proposal, or revise it once."""

    decision: Literal["withdraw", "revise"]
    proposal: ActionChoice | None = None
    """The revised action (required to revise)."""
    why: str = Field(max_length=400)

    @model_validator(mode="after")
    def _proposal_when_revising(self) -> Revision:
        if self.decision == "revise" and self.proposal is None:
            raise ValueError("a revision needs its revised proposal")
        return self


# --- the reviewers ------------------------------------------------------------------------


class AuditVerdict(_Answer):
    """Call audit_verdict once. To approve you must quote, exactly, the raw line(s) or metric
    values you verified; rlagent checks every quote against the run's files."""

    approve: bool
    verified: list[Evidence] = Field(default_factory=list, max_length=4)
    reasons: list[str] = Field(min_length=1, max_length=5)

    @model_validator(mode="after")
    def _quote_to_approve(self) -> AuditVerdict:
        if self.approve and not self.verified:
            raise ValueError("an approval must quote the line or values it verified")
        return self


class Concern(_Answer):
    name: str = Field(max_length=48, pattern=r"^[a-z][a-z0-9_]*$")
    """snake_case, e.g. `run_still_alive`, `checkpoint_incomplete`, `restart_loop`."""
    detail: str = Field(max_length=300)


class SafetyVerdict(_Answer):
    """Call safety_verdict once: is it safe to send this exact command now?"""

    approve: bool
    concerns: list[Concern] = Field(default_factory=list, max_length=5)
    reasons: list[str] = Field(min_length=1, max_length=5)

    @model_validator(mode="after")
    def _concerns_to_reject(self) -> SafetyVerdict:
        if not self.approve and not self.concerns:
            raise ValueError("a rejection must name at least one concern")
        return self


class EffectVerdict(_Answer):
    """Call effect_verdict once: would this action fix what was found, at an acceptable cost?"""

    approve: bool
    reasons: list[str] = Field(min_length=1, max_length=5)


# --- read-only tools ----------------------------------------------------------------------


class ReadLogLines(_Answer):
    """Read lines around a line of a log file of the run (returned as untrusted data)."""

    file: str = Field(max_length=300)
    line: int = Field(ge=1)
    before: int = Field(5, ge=0, le=20)
    after: int = Field(5, ge=0, le=20)


class ReadRollout(_Answer):
    """Read one saved rollout (its completion, reward, truncation, error) at a step, by index."""

    step: int = Field(ge=0)
    index: int = Field(0, ge=0, le=4096)


class GetMetricSeries(_Answer):
    """A metric's recent values (step, value) from the run's metric history."""

    process: Literal["trainer", "orchestrator"]
    metric: str = Field(max_length=64)
    last: int = Field(40, ge=2, le=200)


ANSWERS: dict[str, type[_Answer]] = {
    "report_diagnosis": Diagnosis,
    "report_revision": Revision,
    "audit_verdict": AuditVerdict,
    "safety_verdict": SafetyVerdict,
    "effect_verdict": EffectVerdict,
}
READERS: dict[str, type[_Answer]] = {
    "read_log_lines": ReadLogLines,
    "read_rollout": ReadRollout,
    "get_metric_series": GetMetricSeries,
}


def tool_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with `$ref`s inlined and titles dropped (smaller, and plain for
    any JSON-schema reader)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {k: inline(v) for k, v in node.items() if k != "title" and k != "discriminator"}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return inline(schema)


def tools() -> list[dict[str, Any]]:
    """Every tool, the same list in every request: with tools and the static system prompt
    identical across roles, one cached prefix serves the diagnostician and every reviewer
    (tool_choice differs per call, which leaves the tools/system cache intact)."""
    return [
        {"name": name, "description": (model.__doc__ or name).strip().split("\n\n")[0], "input_schema": tool_schema(model)}
        for name, model in {**READERS, **ANSWERS}.items()
    ]
