"""What a simulated run is: one typed `Scenario`, and the registry of named ones.

A scenario fixes everything that makes a run: its layout (H = prime-rl Aug 2026, L = May 2026),
its shape (steps, batch, lengths, timing), and at most one injected failure (`kind`, starting at
`onset_step` with `severity`). Every number the simulator writes is a pure function of the
scenario and the step, so the same scenario always gives the same bytes, and a run can be
continued later (`append_run`) exactly as if it had been written in one go.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

Layout = Literal["H", "L"]
Kind = Literal["healthy", "entropy-collapse", "nan", "crash-oom", "truncation"]


class Scenario(BaseModel):
    """One simulated prime-rl run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """Registry key; also names the example directories."""
    layout: Layout = "H"
    """H: `logs/attempt_N`, metrics.jsonl, traces.jsonl, JSON configs. L: `logs/*.log`, `run_default/`, TOML."""
    seed: int = 0
    """Seeds every random draw; same seed, same bytes."""
    steps: int = 60
    """Trainer steps written (the snapshot ends when the trainer finishes this step), unless the
    failure ends the run earlier (crash-oom stops at the onset)."""
    max_steps: int = 100
    """`max_steps` in the configs; the run's planned length."""
    step_time_s: float = 40.0
    """Mean trainer step seconds (the orchestrator is tuned to be slightly faster)."""
    start: AwareDatetime = datetime(2026, 8, 24, 14, 2, 0, tzinfo=UTC)
    """When the launcher started (the first log line is ~1 s later)."""
    log_tz: str = "UTC"
    """IANA zone of the machine; logs show local HH:MM:SS in it."""
    envs: list[str] = Field(default_factory=lambda: ["reverse-text"])
    """Train envs; more than one gives H's `╰─` per-env sub-lines and per-env metrics."""
    eval_envs: list[str] | None = None
    """Eval envs (default: same as `envs`); empty list disables evals."""
    kind: Kind = "healthy"
    """Which failure to inject (or none)."""
    onset_step: int = 30
    """First step the failure shows in."""
    severity: float = 1.0
    """How strong the failure is; 1.0 is the textbook case. See `dynamics.py` per kind."""
    model: str = "Qwen/Qwen3-0.6B"
    batch_size: int = 128
    """Rollouts per train batch (`batch_size`)."""
    group_size: int = 16
    """Rollouts per example (H `group_size`, L `rollouts_per_example`)."""
    max_completion_tokens: int = 128
    seq_len: int = 2048
    prompt_tokens: int = 60
    """Mean prompt tokens per sample."""
    turns: float = 1.0
    """Mean model calls per rollout; each is one request line in inference.log."""
    ckpt_interval: int = 10
    eval_interval: int = 10
    eval_examples: int = 32
    """Eval rollouts per eval env and eval step."""
    eval_k: int = 4
    """Rollouts per eval example (avg@k)."""
    finished: bool = False
    """Write the finish lines (`steps` must equal `max_steps`)."""
    trace_fail_rate: float = 0.008
    """Fraction of rollouts whose trace fails (`Trace failed in group`); normal is < 2 %."""
    rollout_steps_kept: int = 2
    """Write rollouts only for the last this-many steps, to keep runs small."""
    trainer_gpus: int = 1
    inference_gpus: int = 1
    output_root: str = "/workspace/prime-rl/outputs"
    """The simulated machine's output_dir (what configs say), independent of where files go."""

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        if not 1 <= self.steps <= self.max_steps:
            raise ValueError(f"steps must be in [1, max_steps]; got {self.steps} > {self.max_steps}")
        if self.finished and self.steps != self.max_steps:
            raise ValueError("a finished run must have steps == max_steps")
        if self.onset_step < 1:
            raise ValueError("onset_step must be >= 1")
        if not self.envs:
            raise ValueError("at least one train env is needed")
        if self.batch_size % self.group_size:
            raise ValueError("batch_size must be a multiple of group_size")
        if self.prompt_tokens + self.max_completion_tokens > self.seq_len:
            raise ValueError("prompt_tokens + max_completion_tokens must fit in seq_len")
        return self

    def variant(self, **changes: object) -> Scenario:
        """A validated copy with some fields changed."""
        return Scenario.model_validate({**self.model_dump(), **changes})

    @property
    def eval_env_names(self) -> list[str]:
        return list(self.envs) if self.eval_envs is None else list(self.eval_envs)

    @property
    def run_name(self) -> str:
        """prime-rl's default `<train envs joined by +>--<model basename>--<8 hex>`, lowercased."""
        digest = hashlib.sha256(f"{self.name}:{self.seed}".encode()).hexdigest()[:8]
        return f"{'+'.join(self.envs)}--{self.model.rsplit('/', 1)[-1]}--{digest}".lower()

    @property
    def sim_run_dir(self) -> str:
        """The run directory as the simulated processes know it (configs, log lines)."""
        if self.layout == "H":
            return f"{self.output_root}/{self.run_name}"
        return "outputs"

    @property
    def crashes(self) -> bool:
        return self.kind == "crash-oom" and self.onset_step <= self.steps

    @property
    def last_trainer_step(self) -> int:
        """The last step the trainer completes in the snapshot."""
        return self.onset_step - 1 if self.crashes else self.steps


_H_START = datetime(2026, 8, 24, 14, 2, 0, tzinfo=UTC)
_L_START = datetime(2026, 5, 21, 9, 15, 0, tzinfo=UTC)


def _registry(*scenarios: Scenario) -> dict[str, Scenario]:
    return {s.name: s for s in scenarios}


SCENARIOS: dict[str, Scenario] = _registry(
    Scenario(name="healthy-h", layout="H", seed=1, steps=60, max_steps=200, start=_H_START),
    Scenario(name="healthy-l", layout="L", seed=2, steps=60, max_steps=200, start=_L_START),
    Scenario(
        name="healthy-multienv-h",
        layout="H",
        seed=3,
        steps=40,
        max_steps=200,
        envs=["reverse-text", "alphabet-sort"],
        start=_H_START,
    ),
    Scenario(name="finished-h", layout="H", seed=4, steps=50, max_steps=50, finished=True, start=_H_START),
    Scenario(
        name="entropy-collapse-h",
        layout="H",
        seed=5,
        steps=60,
        max_steps=200,
        kind="entropy-collapse",
        onset_step=25,
        start=_H_START,
    ),
    Scenario(name="nan-h", layout="H", seed=6, steps=40, max_steps=200, kind="nan", onset_step=28, start=_H_START),
    Scenario(
        name="crash-oom-h",
        layout="H",
        seed=7,
        steps=40,
        max_steps=200,
        kind="crash-oom",
        onset_step=23,
        start=_H_START,
    ),
    Scenario(
        name="truncation-l",
        layout="L",
        seed=8,
        steps=60,
        max_steps=200,
        kind="truncation",
        onset_step=20,
        max_completion_tokens=1792,
        seq_len=2048,
        start=_L_START,
    ),
)
