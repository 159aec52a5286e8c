"""What a SIMULATED verl, TRL or OpenRLHF run is: one typed `FrameworkScenario`, and per failure kind
what a monitor should say about it.

A scenario fixes the framework and the version whose console format it writes (`style`), the run's
shape (steps, batch, lengths, timing), its healthy curves (`profile`) and at most one injected failure
(`kind`, from `onset_step`, with `severity`). Every number and every byte follows from the scenario and
its seed, so the same scenario always gives the same files. A run that crashed can be continued from
its newest checkpoint (`attempt` > 1, `resume_step`), as a relaunch with the framework's resume flag
does; failures that end a run act in the first attempt only.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from rlagent.agents.rules.catalogue import CLUSTER_IDS, FINDING_IDS
from rlagent.evals.simulator.scenario import MAX_STEP_TIME_S

Framework = Literal["verl", "trl", "openrlhf"]
FRAMEWORKS: tuple[str, ...] = ("verl", "trl", "openrlhf")

STYLES: dict[str, tuple[str, ...]] = {
    # verl's console line (frameworks.md 1.1): before v0.5 `f"{k}:{v:.3f}"`; from v0.5 `pprint.pformat(v)`,
    # which under numpy 2 prints worker-side metrics as `np.float64(...)`.
    "verl": ("v0.4", "v0.5-numpy1", "v0.7-numpy2"),
    # transformers' console dicts (frameworks.md 2.1): 4.x raw floats with bare nan, 5.x `.4g` strings.
    "trl": ("tf4", "tf5"),
    # OpenRLHF (frameworks.md 3.1): up to v0.8.0 the Episode bar's postfix, from v0.8.1 `✨ Global step N: {...}`.
    "openrlhf": ("v0.8.0", "v0.11"),
}

Kind = Literal[
    "healthy",
    "entropy-collapse",
    "truncation",
    "nan",
    "kl-blowup",
    "reward-constant",
    "zero-std",
    "degenerate-output",
    "format-collapse",
    "reward-hacking",
    "crash-oom",
    "actor-died",
    "hydra-error",
    "engine-dead",
    "reward-fn-error",
    "nccl-timeout",
    "host-oom",
    "deepspeed-error",
]
KINDS: tuple[str, ...] = Kind.__args__  # type: ignore[attr-defined]
Profile = Literal["default", "noisy", "alarming"]

NEW_IDS: tuple[str, ...] = ("inference_crashed", "reward_fn_error", "degenerate_output", "format_collapse", "reward_hacking")
"""The ids findings.md added with the frameworks; the rules' catalogue may not list them yet."""
ALL_IDS: tuple[str, ...] = (
    *(i for i in FINDING_IDS if i not in CLUSTER_IDS),  # SLURM and multi-node ids: not part of these scenarios
    *(i for i in NEW_IDS if i not in FINDING_IDS),
)
INFO_IDS = frozenset({"run_finished", "reward_flat"})
DOWN_IDS = frozenset({"run_crashed", "run_stalled", "process_down"})


@dataclass(frozen=True)
class Expectation:
    expects: tuple[str, ...]
    tolerates: tuple[str, ...] = ()
    frameworks: tuple[str, ...] = FRAMEWORKS
    """Frameworks that can show this failure (in their files, with their real signatures)."""
    ends_run: bool = False
    """The failure kills the run at the onset (first attempt only)."""
    base: str = "healthy"
    """The prime-rl simulator kind whose curves this failure reuses (evals/simulator/dynamics.py)."""


_QUIET = ("reward_flat",)
_CRASH = ("reward_flat", "checkpoint_failure")

EXPECTATIONS: dict[str, Expectation] = {
    "healthy": Expectation((), _QUIET),
    "entropy-collapse": Expectation(
        ("entropy_collapse",), ("zero_advantage", "reward_flat", "reward_regression"), base="entropy-collapse"
    ),
    "truncation": Expectation(
        ("truncation_high",), ("reward_regression", "length_explosion", "step_time_regression", "reward_flat"), base="truncation"
    ),
    "nan": Expectation(
        ("nan_detected",),
        (
            "truncation_high",
            "length_explosion",
            "reward_regression",
            "zero_advantage",
            "reward_flat",
            "length_collapse",
            "step_time_regression",
            "entropy_collapse",
            "degenerate_output",
        ),
        base="nan",
    ),
    "kl-blowup": Expectation(("kl_blowup",), (*_QUIET, "reward_regression"), base="kl-blowup"),
    "reward-constant": Expectation(
        ("reward_constant", "zero_advantage"), ("reward_regression", "reward_flat", "format_collapse"), base="reward-constant"
    ),
    # TRL logs frac_reward_zero_std; verl and OpenRLHF log no share of zero-std groups
    "zero-std": Expectation(("zero_advantage",), _QUIET, frameworks=("trl",), base="zero-advantage"),
    "degenerate-output": Expectation(
        ("degenerate_output",),
        (
            "truncation_high",
            "length_explosion",
            "reward_regression",
            "entropy_collapse",
            "zero_advantage",
            "reward_flat",
            "step_time_regression",
            "format_collapse",
        ),
        frameworks=("verl", "trl"),  # the only two that save completions (rollout dumps, completions parquet)
    ),
    # a format component of the reward is logged by TRL (`rewards/<func>/mean`); verl and OpenRLHF log one reward
    "format-collapse": Expectation(("format_collapse",), (*_QUIET, "reward_regression"), frameworks=("trl",)),
    "reward-hacking": Expectation(
        ("reward_hacking",),
        (*_QUIET, "length_collapse", "eval_regression", "reward_regression", "entropy_collapse"),
        frameworks=("verl", "trl"),
    ),
    "crash-oom": Expectation(("run_crashed", "cuda_oom"), _CRASH, ends_run=True, base="crash-oom"),
    "actor-died": Expectation(("run_crashed",), (*_CRASH, "host_oom"), frameworks=("verl", "openrlhf"), ends_run=True),
    "hydra-error": Expectation(("run_crashed",), _CRASH, frameworks=("verl",), ends_run=True),
    "engine-dead": Expectation(("inference_crashed", "run_crashed"), _CRASH, frameworks=("verl", "openrlhf"), ends_run=True),
    "reward-fn-error": Expectation(("reward_fn_error", "run_crashed"), _CRASH, frameworks=("verl", "trl"), ends_run=True),
    "nccl-timeout": Expectation(("run_crashed", "nccl_error"), (*_CRASH, "run_stalled"), frameworks=("trl",), ends_run=True),
    "host-oom": Expectation(("run_crashed", "host_oom"), _CRASH, frameworks=("trl", "verl"), ends_run=True),
    "deepspeed-error": Expectation(("run_crashed",), _CRASH, frameworks=("openrlhf",), ends_run=True),
}


class FrameworkScenario(BaseModel):
    """One SIMULATED run of verl, TRL or OpenRLHF (tests, demos and evals only)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = ""
    framework: Framework
    style: str
    """Which version's console format (STYLES)."""
    seed: int = 0
    steps: int = 40
    """Steps recorded (a crash ends the first attempt at the onset instead)."""
    max_steps: int = 100
    """The run's planned length (verl total_training_steps, TRL max_steps, OpenRLHF steps of all episodes)."""
    kind: Kind = "healthy"
    profile: Profile = "default"
    """`alarming`: the framework's normal things that look alarming, all of them and stronger."""
    onset_step: int = 20
    severity: float = 1.0
    step_time_s: float = 60.0
    start: AwareDatetime = datetime(2026, 8, 24, 14, 2, 0, tzinfo=UTC)
    model: str = "Qwen/Qwen2.5-0.5B-Instruct"
    n_gpus: int = 2
    prompts_per_step: int = 8
    """Prompts per training step (verl data.train_batch_size, TRL and OpenRLHF likewise)."""
    group_size: int = 4
    """Completions per prompt (verl rollout.n, TRL num_generations, OpenRLHF n_samples_per_prompt)."""
    max_prompt_length: int = 256
    max_response_length: int = 1024
    save_every: int = 10
    test_every: int = 5
    """verl trainer.test_freq / OpenRLHF eval.steps (TRL GRPO runs here do not evaluate)."""
    logging_steps: int = 1
    """TRL: a console dict every this many steps (averaged over them)."""
    samples_kept: int | None = None
    """Keep rollout dumps / completions of the last this-many steps only (fixtures stay small); None: all."""
    ansi: bool = True
    """Ray's coloured worker prefixes (a log captured from a terminal); False: plain prefixes."""
    glued_tqdm: bool = False
    """verl: tqdm's `\\r` redraws glued in front of the step lines (a `2>&1` file of some setups)."""
    use_kl: bool = False
    """verl actor.use_kl_loss / TRL beta > 0 / OpenRLHF init_kl_coef > 0: a reference KL is logged."""
    finished: bool = False
    """The run reaches max_steps and ends cleanly (steps must equal max_steps)."""
    attempt: int = 1
    resume_step: int | None = None
    """This attempt resumed from checkpoint step N (attempt > 1)."""
    launch_dir: str = ""
    """Where the simulated machine launched the run (what logs and configs say); default per framework."""
    host: str = "gpu-node-07"
    pids: dict[str, int] = Field(default_factory=dict)
    """Live runs: the real pid of each process role, so that the logs name the processes that run."""

    @model_validator(mode="after")
    def _check(self) -> FrameworkScenario:
        if self.style not in STYLES[self.framework]:
            raise ValueError(f"style {self.style!r} is not one of {', '.join(STYLES[self.framework])} for {self.framework}")
        if self.framework not in EXPECTATIONS[self.kind].frameworks:
            raise ValueError(f"{self.framework} cannot show {self.kind} (frameworks: {EXPECTATIONS[self.kind].frameworks})")
        if not 1 <= self.steps <= self.max_steps:
            raise ValueError(f"steps must be in [1, max_steps]; got {self.steps} > {self.max_steps}")
        if self.finished and self.steps != self.max_steps:
            raise ValueError("a finished run must have steps == max_steps")
        if self.onset_step < 1:
            raise ValueError("onset_step must be >= 1")
        if not (0 < self.severity < math.inf and 0 < self.step_time_s <= MAX_STEP_TIME_S):
            raise ValueError(f"severity must be positive and finite, step_time_s positive and at most a day ({MAX_STEP_TIME_S})")
        if (self.resume_step is None) != (self.attempt == 1):
            raise ValueError("a resumed attempt needs resume_step and attempt > 1 (and only it)")
        if self.resume_step is not None and not 1 <= self.resume_step < self.steps:
            raise ValueError(f"resume_step must be in [1, steps); got {self.resume_step}")
        if self.kind == "nccl-timeout" and self.n_gpus < 2:
            raise ValueError("an NCCL timeout needs at least 2 GPUs")
        if self.framework == "trl" and self.logging_steps < 1:
            raise ValueError("logging_steps must be >= 1")
        return self

    def variant(self, **changes: object) -> FrameworkScenario:
        return FrameworkScenario.model_validate({**self.model_dump(), **changes})

    # ---- derived ------------------------------------------------------------------------------

    @property
    def expectation(self) -> Expectation:
        return EXPECTATIONS[self.kind]

    @property
    def first_step(self) -> int:
        return (self.resume_step or 0) + 1

    @property
    def ends_early(self) -> bool:
        """A crash ends this attempt at the onset (first attempt only)."""
        return self.expectation.ends_run and self.attempt == 1 and self.onset_step <= self.steps

    @property
    def crash_step(self) -> int | None:
        """The step the run dies in (its line is never written); 0: before the first step."""
        if not self.ends_early:
            return None
        return 0 if self.kind == "hydra-error" else self.onset_step

    @property
    def last_step(self) -> int:
        """The last step whose line this attempt writes."""
        crash = self.crash_step
        return crash - 1 if crash is not None else self.steps

    @property
    def digest(self) -> str:
        return hashlib.sha256(f"{self.framework}:{self.name}:{self.seed}".encode()).hexdigest()

    @property
    def root(self) -> str:
        """The launch directory on the simulated machine."""
        if self.launch_dir:
            return self.launch_dir
        return {"verl": "/workspace/verl", "trl": "/workspace/open-r1", "openrlhf": "/openrlhf"}[self.framework]

    @property
    def model_short(self) -> str:
        return self.model.rsplit("/", 1)[-1]

    @property
    def batch(self) -> int:
        """Completions per step."""
        return self.prompts_per_step * self.group_size


def pid_of(sc: FrameworkScenario, role: str, attempt: int | None = None) -> int:
    """The pid of a process role: the real one in a live run, else a plausible, deterministic one."""
    if role in sc.pids and attempt in (None, sc.attempt):
        return sc.pids[role]
    digest = hashlib.sha256(f"{sc.digest}:{attempt or sc.attempt}:{role}".encode()).digest()
    return 20_000 + int.from_bytes(digest[:4], "big") % 3_000_000
