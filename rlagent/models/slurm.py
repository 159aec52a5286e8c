"""SLURM job state as rlagent reads it (tools/slurm.py fills these; nothing here runs a command)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

# States in which a job still holds or waits for resources.
ACTIVE_STATES = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING",
     "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
)  # fmt: skip


class SlurmJob(BaseModel):
    """One SLURM job (or one task of an array job) as one source reported it."""

    job_id: str
    """The id as SLURM prints it: `123`, or `123_4` for task 4 of array job 123."""
    raw_job_id: str | None = None
    """The job's own numeric id (an array task has one of its own, e.g. `123_4` -> `127`)."""
    array_job_id: str | None = None
    array_task_id: str | None = None
    """Task index, or the pending range (`0-9`) of tasks not yet split off."""
    name: str | None = None
    state: str | None = None
    """Base state in capitals: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, OUT_OF_MEMORY..."""
    reason: str | None = None
    """Why it is pending or how it ended (`Dependency`, `Resources`, `NonZeroExitCode`, `TimeLimit`);
    None when SLURM says `None`."""
    partition: str | None = None
    user: str | None = None
    nodes: str | None = None
    """The node list as SLURM writes it (`gpu[01-04]`); None while pending."""
    node_count: int | None = None
    elapsed_s: float | None = None
    time_limit_s: float | None = None
    """None when unlimited or unknown."""
    exit_code: int | None = None
    exit_signal: int | None = None
    """The signal that ended the batch script (15 after scancel or a time limit), 0 if none."""
    work_dir: str | None = None
    comment: str | None = None
    submit_time: datetime | None = None
    start_time: datetime | None = None
    """For a pending job, SLURM's expected start if it has one."""
    end_time: datetime | None = None
    """For a running job, when its time limit runs out."""
    std_out: str | None = None
    """Path of the job's stdout; `%j`-style patterns are expanded when the source gives them raw."""
    std_err: str | None = None
    dependency: str | None = None
    requeue: bool | None = None
    restarts: int | None = None
    """How many times SLURM requeued it."""
    source: str = ""
    """The command that answered: `squeue --json`, `squeue`, `scontrol`, `sacct` or `sacct -c`."""
    matched_by: list[str] = Field(default_factory=list)
    """How the job was tied to a run dir (`log_file:job_12.log`, `sbatch:rl.sbatch`, `std_out`,
    `work_dir`, `comment`, `name`); empty when asked for by id."""

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    def ids(self) -> set[str]:
        """Every id this job answers to."""
        return {i for i in (self.job_id, self.raw_job_id) if i}


class SlurmReport(BaseModel):
    """What the SLURM commands said about some jobs. Failures are notes, never exceptions."""

    jobs: list[SlurmJob] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    """The commands that answered, in the order they were asked."""
    missing: list[str] = Field(default_factory=list)
    """Job ids asked for that no source knew."""

    def job(self, job_id: str) -> SlurmJob | None:
        return next((job for job in self.jobs if job_id in job.ids()), None)


class TimeLimitEta(BaseModel):
    """Will a job reach max_steps before SLURM kills it at its time limit?"""

    will_hit_limit: bool | None
    """None when it cannot be judged (no step rate); False when there is no limit or it finishes first."""
    steps_left: int
    remaining_s: float | None = None
    """Time left before the limit."""
    finish_in_s: float | None = None
    """Time the remaining steps need at this rate."""
    margin_s: float | None = None
    """remaining_s - finish_in_s: negative when the limit comes first."""
    last_step_before_kill: int | None = None
    """The last step completed before the kill, when the limit comes first."""
    kill_in_s: float | None = None
    kill_at: datetime | None = None
    finish_at: datetime | None = None
    note: str = ""
