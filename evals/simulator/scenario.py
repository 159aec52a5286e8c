"""What a simulated run is: one typed `Scenario`, and the registry of named ones.

A scenario fixes everything that makes a run: its layout (H = prime-rl Aug 2026, L = May 2026),
its shape (steps, batch, lengths, timing), its healthy curves (`profile`), and at most one
injected failure (`kind`, starting at `onset_step` with `severity`). Every number the simulator
writes is a pure function of the scenario and the step, so the same scenario always gives the
same bytes, and a run can be continued later (`append_run`) exactly as if it had been written in
one go. What the monitor should report about it is on the scenario too (`expects`, `tolerates`,
`forbids`, `signal_step`, `expected_health`; see `expectations.py`). The named scenarios are in
`registry.py`.
"""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from .expectations import ALL_IDS, DOWN_IDS, EXPECTATIONS, INFO_IDS

Layout = Literal["H", "L"]
Kind = Literal[
    "healthy",
    "entropy-collapse",
    "entropy-explosion",
    "nan",
    "crash-oom",
    "crash-nccl",
    "crash-python",
    "host-oom",
    "truncation",
    "zero-advantage",
    "reward-constant",
    "env-errors",
    "errored-rollouts",
    "orchestrator-bottleneck",
    "trainer-bottleneck",
    "grad-spike",
    "length-collapse",
    "length-explosion",
    "reward-regression",
    "reward-flat",
    "eval-regression",
    "mismatch-kl",
    "kl-blowup",
    "empty-batches",
    "off-policy-drops",
    "checkpoint-failure",
    "disk-low",
    "inference-unreachable",
    "step-time-regression",
    "stall",
]
Profile = Literal["default", "fast", "slow", "plateau", "noisy", "alarming"]
KINDS: tuple[str, ...] = Kind.__args__  # type: ignore[attr-defined]


MAX_STEP_TIME_S = 86400
"""A simulated step takes at most a day (the framework scenarios share the bound)."""


class Scenario(BaseModel):
    """One simulated prime-rl run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """Registry key; also names the example directories."""
    description: str = ""
    """One line for `rlagent simulate --list`."""
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
    profile: Profile = "default"
    """Shape of the healthy curves: fast/slow learner, early plateau, noisy, or `alarming` (the
    normal things that look alarming, all of them and stronger: long start-up, loss 0 at the
    first steps, a 4x one-step grad-norm excursion, ~3 % errored and truncated rollouts)."""
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
    slurm: bool = False
    """Launched through SLURM: `rl.sbatch`, `configs/rl.json` and the launcher's output in
    `job_<id>.log` (local runs print it to the Launcher terminal only)."""
    attempt: int = 1
    """Which launch this is (H `logs/attempt_N`); > 1 only with `resume_step`."""
    resume_step: int | None = None
    """This attempt resumed from checkpoint step N and trains from N + 1. Failures that end a
    run (crashes, hangs) are injected in the first attempt only: a resume gets past them."""
    output_root: str = "/workspace/prime-rl/outputs"
    """The simulated machine's output_dir (what configs say), independent of where files go."""
    run_label: str | None = None
    """prime-rl's `--run.name` (H): the run directory's name; default: the generated one."""

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
        if not 0 < self.step_time_s <= MAX_STEP_TIME_S:  # the timeline ticks through every step: 1e308 s never ended
            raise ValueError(f"step_time_s must be positive and at most a day ({MAX_STEP_TIME_S})")
        if not 0 < self.severity < math.inf:
            raise ValueError("severity must be positive and finite")
        if (self.resume_step is None) != (self.attempt == 1):
            raise ValueError("a resumed attempt needs resume_step and attempt > 1 (and only it)")
        if self.resume_step is not None and not 1 <= self.resume_step < self.steps:
            raise ValueError(f"resume_step must be in [1, steps); got {self.resume_step}")
        if self.slurm and self.layout != "H":
            raise ValueError("SLURM runs are simulated in layout H only")
        if self.kind == "crash-nccl" and self.trainer_gpus < 2:
            raise ValueError("an NCCL timeout needs a trainer on at least 2 GPUs")
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
        if self.run_label:
            return self.run_label
        digest = hashlib.sha256(f"{self.name}:{self.seed}".encode()).hexdigest()[:8]
        return f"{'+'.join(self.envs)}--{self.model.rsplit('/', 1)[-1]}--{digest}".lower()

    @property
    def sim_run_dir(self) -> str:
        """The run directory as the simulated processes know it (configs, log lines)."""
        if self.layout == "H":
            return f"{self.output_root}/{self.run_name}"
        return "outputs"

    @property
    def first_step(self) -> int:
        """The first step this attempt trains."""
        return (self.resume_step or 0) + 1

    @property
    def ends_early(self) -> bool:
        """A crash or hang ends this recording at the onset (first attempt only)."""
        return EXPECTATIONS[self.kind].ends_run and self.attempt == 1 and self.onset_step <= self.steps

    @property
    def crashes(self) -> bool:
        """The run dies at the onset (everything that ends it but a silent hang)."""
        return self.ends_early and self.kind != "stall"

    @property
    def hangs(self) -> bool:
        """The trainer hangs at the onset and the recording ends while it still does."""
        return self.ends_early and self.kind == "stall"

    # ---- what the monitor should say (expectations.py) -------------------------------------

    @property
    def signal_step(self) -> int | None:
        """The first step whose files show the failure (None: healthy). A checkpoint failure
        shows at the first checkpoint step at or after the onset."""
        if self.kind == "healthy" or (self.attempt > 1 and EXPECTATIONS[self.kind].ends_run):
            return None
        if self.kind == "checkpoint-failure":
            return -(-self.onset_step // self.ckpt_interval) * self.ckpt_interval
        return self.onset_step

    @property
    def signal_visible(self) -> bool:
        """The signal is on disk in this layout and the run is long enough for the rules."""
        exp = EXPECTATIONS[self.kind]
        step = self.signal_step
        if step is None or self.layout not in exp.layouts:
            return False
        if exp.ends_run:
            return self.ends_early
        lead = 2 if self.kind == "checkpoint-failure" else exp.lead
        return self.steps >= step + lead

    @property
    def expects(self) -> list[str]:
        """Finding ids a check-in at the end of the run must report."""
        ids = list(EXPECTATIONS[self.kind].expects) if self.signal_visible else []
        if self.finished:
            ids.append("run_finished")
        return ids

    @property
    def tolerates(self) -> list[str]:
        """Ids that may be reported too: consequences of the failure, and info-level notes."""
        exp = EXPECTATIONS[self.kind]
        ids = set(exp.tolerates)
        if not self.signal_visible:
            ids |= set(exp.expects)  # the onset is too close to the end to be sure either way
        return sorted(ids - set(self.expects))

    @property
    def forbids(self) -> list[str]:
        """Every other id: reporting one of these is a false alarm."""
        allowed = set(self.expects) | set(self.tolerates)
        return [i for i in ALL_IDS if i not in allowed]

    @property
    def expected_health(self) -> str:
        """`Healthy`, `Degraded` or `Down`, as the check-in at the end of the run should say."""
        ids = set(self.expects)
        if ids & DOWN_IDS:
            return "Down"
        return "Degraded" if ids - INFO_IDS else "Healthy"

    @property
    def last_trainer_step(self) -> int:
        """The last step the trainer completes in the snapshot (crashes: see the timeline)."""
        return self.onset_step - 1 if self.ends_early else self.steps
