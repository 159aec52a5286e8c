"""The closed set of actions rlagent may take on a run, and the review and approval around them.

Nothing here is free text that becomes a command. An action is one of three kinds; a config
change is a list of typed values of allow-listed knobs with allowed ranges; the exact command is
built by `rlagent.tools.launch_command` from the run's own launch command plus these fields, so
log, rollout and LLM text can reach a proposal's `rationale` (shown to people) but never a command.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator


class ActionKind(StrEnum):
    RESTART = "restart"
    """Resume from the newest complete checkpoint with the run's own launch command."""
    RESTART_WITH_OVERRIDES = "restart_with_overrides"
    """The same, with typed config overrides appended."""
    STOP = "stop"
    """Ctrl-C into the Launcher pane (prime-rl's launcher then tears its processes down); for a
    hung SLURM job, `scancel <job>` typed into it."""
    RESUBMIT = "resubmit"
    """SLURM: `sbatch` of the run's own batch script with the resume flags (tools.resubmit)."""


RESTARTS = (ActionKind.RESTART, ActionKind.RESTART_WITH_OVERRIDES, ActionKind.RESUBMIT)


class Knob(StrEnum):
    """Config knobs an override may change (the allow-list)."""

    TEMPERATURE = "temperature"
    MAX_COMPLETION_TOKENS = "max_completion_tokens"
    LEARNING_RATE = "learning_rate"
    BATCH_SIZE = "batch_size"
    GROUP_SIZE = "group_size"
    MAX_OFF_POLICY_STEPS = "max_off_policy_steps"
    SEQ_LEN = "seq_len"


@dataclass(frozen=True)
class KnobSpec:
    low: float
    high: float
    integer: bool
    flag_h: str
    """prime-rl `rl` flag, layout H (kebab-case, as prime-rl's CLI takes it)."""
    flag_l: str
    """The same for layout L."""
    config_field: str | None
    """`RunConfig` attribute holding the run's current value, when rlagent reads it."""
    max_factor: float = 4.0
    """A single change may move the value by at most this factor either way."""

    def flag(self, layout: str) -> str:
        return self.flag_h if layout == "H" else self.flag_l


# Flags follow the resolved-config paths of prime-rl-formats.md section 3 ("Key settings"):
# H orchestrator.json `train.sampling.*`, `batch_size`, `group_size`, `max_off_policy_steps`,
# rl.json's shared `seq_len`; L's `rollouts_per_example` and `max_async_level`.
KNOBS: dict[Knob, KnobSpec] = {
    Knob.TEMPERATURE: KnobSpec(
        0.1,
        2.0,
        False,
        "--orchestrator.train.sampling.temperature",
        "--orchestrator.train.sampling.temperature",
        "temperature",
    ),
    Knob.MAX_COMPLETION_TOKENS: KnobSpec(
        16,
        131072,
        True,
        "--orchestrator.train.sampling.max-completion-tokens",
        "--orchestrator.train.sampling.max-completion-tokens",
        "max_completion_tokens",
    ),
    Knob.LEARNING_RATE: KnobSpec(1e-9, 1e-3, False, "--trainer.optim.lr", "--trainer.optim.lr", None, max_factor=10.0),
    Knob.BATCH_SIZE: KnobSpec(1, 65536, True, "--orchestrator.batch-size", "--orchestrator.batch-size", "batch_size"),
    Knob.GROUP_SIZE: KnobSpec(2, 1024, True, "--orchestrator.group-size", "--orchestrator.rollouts-per-example", "group_size"),
    Knob.MAX_OFF_POLICY_STEPS: KnobSpec(
        0, 64, True, "--orchestrator.max-off-policy-steps", "--orchestrator.max-async-level", "max_off_policy_steps"
    ),
    Knob.SEQ_LEN: KnobSpec(256, 262144, True, "--seq-len", "--seq-len", "seq_len"),
}


class Override(BaseModel):
    """One typed config change."""

    knob: Knob
    value: float
    current: float | None = None
    """The run's value before the change, when known (from its resolved configs)."""

    @model_validator(mode="after")
    def _well_formed(self) -> Override:
        if not math.isfinite(self.value):
            raise ValueError(f"{self.knob}: value must be finite")
        if KNOBS[self.knob].integer and self.value != int(self.value):
            raise ValueError(f"{self.knob}: must be a whole number, got {self.value}")
        return self

    def text(self) -> str:
        """The value as it goes on the command line."""
        return str(int(self.value)) if KNOBS[self.knob].integer else repr(float(self.value))


# --- The load-bearing claim of a proposal: what the evidence auditor re-reads from disk ----------


class LogClaim(BaseModel):
    kind: Literal["log"] = "log"
    file: str
    """Relative to the run dir, as the collector resolved it (e.g. `logs/attempt_1/trainer.log`)."""
    line: int = Field(ge=1)
    text: str
    """The head of the message on that line (control sequences and rank prefix stripped)."""

    def cite(self) -> str:
        return f"{self.file}:{self.line}: {self.text}"


class MetricClaim(BaseModel):
    kind: Literal["metric"] = "metric"
    process: Literal["trainer", "orchestrator"]
    metric: str
    """Canonical name (tools.metric_names), e.g. `truncation`, `loss`."""
    step: int
    value: float

    def cite(self) -> str:
        return f"{self.process} {self.metric} @ step {self.step} = {self.value:.4g}"


class ProcessClaim(BaseModel):
    kind: Literal["process"] = "process"
    missing: list[str]
    """Process roles (`Trainer`, ...) said to be gone."""

    def cite(self) -> str:
        return "no live " + ", ".join(f"PRIME-RL::{role}" for role in self.missing) + " process"


class StallClaim(BaseModel):
    kind: Literal["stall"] = "stall"
    process: Literal["trainer", "orchestrator"]
    last_step: int
    """No step line after this one."""

    def cite(self) -> str:
        return f"no {self.process} step after step {self.last_step}"


class SlurmClaim(BaseModel):
    kind: Literal["slurm"] = "slurm"
    job_id: str
    state: str
    """The state the job was seen in (FAILED, TIMEOUT, RUNNING for a hung job...)."""

    def cite(self) -> str:
        return f"SLURM job {self.job_id} JobState={self.state}"


Claim = Annotated[LogClaim | MetricClaim | ProcessClaim | StallClaim | SlurmClaim, Field(discriminator="kind")]


class Proposal(BaseModel):
    """At most one per check-in, proposed by the diagnostician from evidence."""

    action: ActionKind
    addresses: list[str]
    """Finding ids it addresses, the primary (load-bearing) one first."""
    claim: Claim
    rationale: str
    """Why, for people; written by rlagent from numbers and finding ids, never part of a command."""
    resume_step: int | None = None
    """Restarts: the newest complete checkpoint the diagnostician saw."""
    overrides: list[Override] = Field(default_factory=list)
    revision: int = 0
    """0 as first proposed; 1 after the diagnostician revised it once following a rejection."""
    job_id: str | None = None
    """SLURM: the job a stop cancels (`scancel`), or the ended job a resubmit follows."""

    def headline(self) -> str:
        if self.action is ActionKind.STOP:
            if self.job_id:
                return f"stop the run (scancel SLURM job {self.job_id})"
            return "stop the run (Ctrl-C into the Launcher pane)"
        text = f"{self.action.value} from checkpoint step {self.resume_step}"
        if self.overrides:
            changes = ", ".join(f"{o.knob.value} {_num(o.current)} -> {o.text()}" for o in self.overrides)
            text += f" with {changes}"
        return text


def _num(value: float | None) -> str:
    if value is None:
        return "?"
    return str(int(value)) if value == int(value) else f"{value:g}"


# --- Review ----------------------------------------------------------------------------------


class Check(BaseModel):
    """One reason of a verdict: what was checked, whether it held, and what was seen."""

    name: str
    """Stable code, e.g. `claim_on_disk`, `restart_budget`, `override_range`."""
    ok: bool
    detail: str


class Verdict(BaseModel):
    reviewer: str
    duty: str
    approve: bool
    reasons: list[Check]

    @model_validator(mode="after")
    def _consistent(self) -> Verdict:
        if self.approve and any(not c.ok for c in self.reasons):
            raise ValueError("a verdict with a failed check cannot approve")
        return self

    @classmethod
    def from_checks(cls, reviewer: str, duty: str, checks: list[Check]) -> Verdict:
        return cls(reviewer=reviewer, duty=duty, approve=bool(checks) and all(c.ok for c in checks), reasons=checks)


class LaunchSource(StrEnum):
    CONFIG = "config"
    WANDB_ARGS = "wandb_args"
    LAUNCHER_PANE = "launcher_pane"
    """A guess read from the Launcher pane, shown to a person to confirm; never a plan's source."""
    SBATCH = "sbatch"
    LAUNCH_SCRIPT = "launch_script"
    """The run's own launch script (verl/TRL/OpenRLHF examples pass extra flags on with "$@")."""


class LaunchCommand(BaseModel):
    """The run's own launch command, as found (never guessed)."""

    argv: list[str]
    source: LaunchSource
    detail: str
    """Where exactly, in words (e.g. `WANDB_ARGS of torchrun (pid 4242)`)."""


class TmuxTarget(BaseModel):
    socket: str | None = None
    """tmux -L name; None is the default server."""
    session: str = "prime-rl"
    window: str = "Launcher"

    def describe(self) -> str:
        where = f" (tmux -L {self.socket})" if self.socket else ""
        return f"{self.session}:{self.window}{where}"


class CommandPlan(BaseModel):
    """What exactly would be sent, built before review so the reviewers judge the real thing."""

    target: TmuxTarget
    launch: LaunchCommand | None = None
    send: str | None = None
    """Restarts: the command line, typed into the pane and followed by Enter. Stop: `C-c`."""
    keys: bool = False
    """True when `send` is a tmux key name (stop), not text."""
    argv: list[str] = Field(default_factory=list)
    resume_step: int | None = None
    problem: str | None = None
    """Why no command could be built (no launch command found, no complete checkpoint, ...)."""

    def display(self) -> str:
        if self.send is None:
            return f"(none: {self.problem})"
        return "Ctrl-C (tmux key C-c)" if self.keys else self.send


class Review(BaseModel):
    round: int
    proposal: Proposal
    plan: CommandPlan
    verdicts: list[Verdict]

    @property
    def agreed(self) -> bool:
        """Unanimity: every reviewer approved (and there were reviewers)."""
        return bool(self.verdicts) and all(v.approve for v in self.verdicts)


# --- The gate --------------------------------------------------------------------------------


class ApprovalMode(StrEnum):
    ASK = "ask"
    """Offer an agreed command for a person's approval (prompt in a terminal, else pending)."""
    NEVER = "never"
    """Observe only: never prompt, never send."""


class Gate(BaseModel):
    """How this check-in's agreed proposal may reach a person (set by the monitor)."""

    mode: ApprovalMode = ApprovalMode.NEVER
    expiry_s: float = 7200.0
    why_not: str | None = None
    """When mode is NEVER: why (`--approve never`, an offline recorded run)."""


class ApprovalRequest(BaseModel):
    """The payload of the launcher's `interrupt()`: everything a person needs to decide."""

    run_dir: str
    checkin: int
    action: ActionKind
    headline: str
    command: str
    """Exactly what would be sent (`CommandPlan.display()`)."""
    target: TmuxTarget
    source: str
    """Where the launch command came from."""
    why: list[str]
    """The addressed findings' summaries and the proposal's rationale."""
    verdicts: list[Verdict]
    created_at: datetime
    expires_at: datetime


class Decision(BaseModel):
    """A person's answer (or its absence), given to `Command(resume=...)`."""

    approved: bool
    by: str
    """Who and how, in words (e.g. `alice at the rlagent check prompt`)."""
    at: datetime
    how: Literal["prompt", "approve_command", "expired"] = "prompt"
    request_id: str | None = None
    """The interrupt this answers; an answer to another one is refused."""


class Verification(BaseModel):
    ok: bool
    checks: list[Check]
    step: int | None = None
    attempt: str | None = None
    waited_s: float = 0.0


class LaunchStatus(StrEnum):
    SENT = "sent"
    DECLINED = "declined"
    EXPIRED = "expired"
    REFUSED = "refused"
    """Approved, but a precondition failed at send time (busy pane, changed run)."""
    ERROR = "error"
    """Approved, but the tmux target could not be reached (missing server, session, window)."""


class LaunchOutcome(BaseModel):
    status: LaunchStatus
    decision: Decision
    note: str
    sent: str | None = None
    """Word for word what was sent, when something was."""
    target: TmuxTarget
    verification: Verification | None = None
    at: datetime


class DispatchRecord(BaseModel):
    """A command rlagent sent to a run: the restart budget and loop detection read these."""

    checkin: int
    action: ActionKind
    resume_step: int | None
    sent_at: datetime
    verified: bool | None = None
