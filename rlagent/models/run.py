"""Which run is watched, what its configs say, and the words a check-in judges it with."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class Layout(StrEnum):
    """The two prime-rl on-disk layouts (reference/prime-rl-formats.md)."""

    H = "H"  # Aug 2026: configs/*.json, logs/attempt_N, metrics.jsonl, traces.jsonl
    L = "L"  # May 2026: configs/*.toml, flat logs/, run_default/rollouts/*/train_rollouts.jsonl


class Framework(StrEnum):
    """The training frameworks rlagent reads (reference/frameworks.md)."""

    PRIME_RL = "prime-rl"
    VERL = "verl"
    TRL = "trl"
    OPENRLHF = "openrlhf"


class Health(StrEnum):
    HEALTHY = "Healthy"
    DEGRADED = "Degraded"
    DOWN = "Down"


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class Category(StrEnum):
    HEALTH = "health"
    PROGRESS = "progress"
    STABILITY = "stability"
    PERFORMANCE = "performance"


class RunInfo(BaseModel):
    """Which run is being watched."""

    run_dir: str
    """Absolute path of the run directory."""
    layout: Layout | None = None
    """prime-rl's on-disk layout; None for the other frameworks."""
    name: str
    """Run name: the basename of the run dir (H `run.name`)."""
    framework: Framework = Framework.PRIME_RL
    picked_from: str | None = None
    """When the user pointed at an output dir holding several runs: that dir (the newest run was taken)."""


class RunConfig(BaseModel):
    """The settings a monitor needs, read from the run's resolved configs."""

    max_steps: int | None = None
    model: str | None = None
    batch_size: int | None = None
    token_batch_size: int | None = None
    group_size: int | None = None
    """Rollouts per example (H `group_size`, L `rollouts_per_example`)."""
    max_completion_tokens: int | None = None
    seq_len: int | None = None
    ckpt_interval: int | None = None
    max_off_policy_steps: int | None = None
    temperature: float | None = None
    inference_url: str | None = None
    envs: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    """Config files read, relative to the run dir."""
    problems: list[str] = Field(default_factory=list)
    """Clear notes about configs that could not be read (malformed TOML/JSON, missing)."""
