"""Running SLURM's commands and asking about jobs: `squeue --json` (or `squeue -o` where --json is
unsupported), `scontrol -o show job`, `sacct`, and `sacct -c` (the job completion log, for clusters
whose accounting is off), each parsed by tools/slurm_parse.py; and when a job will hit its time limit.
Every command runs without a shell, with a bounded timeout, in its own process group (a hung command
and its children are killed). A missing command, a timeout, a non-zero exit, garbage output or an
unknown job id becomes a note in the SlurmReport; nothing here raises on them.

The commands run with `TZ=UTC` and `SLURM_TIME_FORMAT=standard`, so the times they print are read
as UTC whatever the caller's zone or time format.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from rlagent.models.slurm import SlurmJob, SlurmReport, TimeLimitEta
from rlagent.tools.slurm_parse import (
    JOB_ID,
    SACCT_BASIC_FIELDS,
    SACCT_FIELDS,
    SEP,
    SQUEUE_FORMAT,
    parse_sacct,
    parse_scontrol_jobs,
    parse_squeue_json,
    parse_squeue_text,
)

DEFAULT_TIMEOUT = 5.0
MAX_SCONTROL_CALLS = 16

# ---------------------------------------------------------------------------------------------
# running a command


@dataclass(frozen=True)
class CommandResult:
    """What one command did. `note` is set when it did not answer (missing, timeout, non-zero)."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    note: str = ""
    missing: bool = False
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return not self.note


def slurm_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a SLURM command runs with: `env` (default: this process's) plus TZ=UTC and
    the standard time format, so that printed times parse the same everywhere."""
    out = dict(os.environ if env is None else env)
    out["TZ"] = "UTC"
    out["SLURM_TIME_FORMAT"] = "standard"
    return out


def run_command(argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT) -> CommandResult:
    """Run `argv` (no shell) for at most `timeout` seconds; never raises for the usual failures."""
    name = " ".join(argv[:2]) if len(argv) > 1 and argv[1].startswith("--json") else argv[0]
    args = tuple(argv)
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=slurm_env(env),
            start_new_session=True,  # a timeout kills the command's whole process group
        )
    except FileNotFoundError:
        return CommandResult(args, None, "", "", f"{argv[0]}: not found on PATH", missing=True)
    except OSError as exc:
        return CommandResult(args, None, "", "", f"{argv[0]}: cannot run ({exc.strerror or exc})", missing=True)
    with proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=2)
            return CommandResult(args, None, "", "", f"{name}: no answer within {timeout:g} s", timed_out=True)
    stdout = out.decode("utf-8", errors="replace")
    stderr = err.decode("utf-8", errors="replace")
    if proc.returncode != 0:
        first = next((line.strip() for line in stderr.splitlines() if line.strip()), "no message")
        return CommandResult(args, proc.returncode, stdout, stderr, f"{name} exited {proc.returncode}: {first[:200]}")
    return CommandResult(args, 0, stdout, stderr)


def _unknown_job(result: CommandResult) -> bool:
    return "Invalid job id" in result.stderr


def _controller_down(result: CommandResult) -> bool:
    return result.timed_out or "Unable to contact slurm controller" in result.stderr or "Could not establish" in result.stderr


# ---------------------------------------------------------------------------------------------
# queries


def _select(jobs: Iterable[SlurmJob], job_ids: Sequence[str] | None) -> list[SlurmJob]:
    if job_ids is None:
        return list(jobs)
    wanted = set(job_ids)
    return [job for job in jobs if job.ids() & wanted or (job.array_job_id in wanted)]


def _found(jobs: Iterable[SlurmJob], job_id: str) -> bool:
    return any(job_id in job.ids() or job.array_job_id == job_id for job in jobs)


def squeue(
    job_ids: Sequence[str] | None = None, *, user: str | None = None, env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT, now: float | None = None,
) -> SlurmReport:  # fmt: skip
    """Jobs the controller holds (running, pending, and finished ones for MinJobAge), all users
    unless `user`. `squeue --json` first; `squeue -h -o` when this squeue has no --json."""
    report = SlurmReport()
    argv = ["squeue", "--json", "-t", "all"] + (["-u", user] if user else [])
    result = run_command(argv, env=env, timeout=timeout)
    jobs: list[SlurmJob] | None = None
    if result.ok:
        jobs, notes = parse_squeue_json(result.stdout, now)
        if notes and not jobs:
            report.notes.append(f"{notes[0]}; trying squeue -o")
            jobs = None
        else:
            report.notes.extend(notes)
            report.sources.append("squeue --json")
    elif re.search(r"unrecognized option|invalid option|unknown option", result.stderr):
        report.notes.append("squeue has no --json here (older SLURM): using squeue -o")
    else:
        report.notes.append(result.note)
        return report
    if jobs is None:
        argv = ["squeue", "-h", "-t", "all", "-o", SQUEUE_FORMAT] + (["-u", user] if user else [])
        if job_ids:
            argv += ["-j", ",".join(job_ids)]
        result = run_command(argv, env=env, timeout=timeout)
        if result.ok:
            jobs, notes = parse_squeue_text(result.stdout)
            report.notes.extend(notes)
            report.sources.append("squeue")
        elif _unknown_job(result):
            jobs = []
            report.sources.append("squeue")
        else:
            report.notes.append(result.note)
            return report
    if user:
        jobs = [job for job in jobs if job.user in (None, user)]
    report.jobs = _select(jobs, job_ids)
    return report


def scontrol_jobs(
    job_ids: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT
) -> SlurmReport:
    """`scontrol -o show job J` for each id (at most MAX_SCONTROL_CALLS calls; stops at the first
    call that shows the controller unreachable or the command missing)."""
    report = SlurmReport()
    for i, job_id in enumerate(job_ids):
        if i >= MAX_SCONTROL_CALLS:
            report.notes.append(f"scontrol: asked about the first {MAX_SCONTROL_CALLS} of {len(job_ids)} jobs only")
            break
        result = run_command(["scontrol", "-o", "show", "job", job_id], env=env, timeout=timeout)
        if _unknown_job(result):
            if "scontrol" not in report.sources:
                report.sources.append("scontrol")
            continue
        if not result.ok:
            report.notes.append(result.note)
            if result.missing or _controller_down(result):
                break
            continue
        jobs, notes = parse_scontrol_jobs(result.stdout)
        report.notes.extend(notes)
        report.jobs.extend(_select(jobs, [job_id]))
        if "scontrol" not in report.sources:
            report.sources.append("scontrol")
    return report


def sacct_jobs(
    job_ids: Sequence[str] | None = None, *, completion: bool = False, env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> SlurmReport:  # fmt: skip
    """`sacct -X` (accounting database) or, with `completion`, `sacct -c` (the job completion log
    of `JobCompType=jobcomp/filetxt`, readable when accounting is off). Without ids: today's jobs."""
    source = "sacct -c" if completion else "sacct"
    report = SlurmReport()
    fields: Sequence[str] = SACCT_FIELDS
    for attempt in range(2):
        argv = ["sacct", *(["-c"] if completion else []), "-X", "-P", "-n", f"--delimiter={SEP}", "-o", ",".join(fields)]
        if job_ids:
            argv += ["-j", ",".join(job_ids)]
        result = run_command(argv, env=env, timeout=timeout)
        if result.ok:
            jobs, notes = parse_sacct(result.stdout, fields, source)
            report.notes.extend(notes)
            report.jobs = _select(jobs, job_ids)
            report.sources.append(source)
            return report
        if attempt == 0 and "Invalid field" in result.stderr:
            fields = SACCT_BASIC_FIELDS  # an older sacct: fewer fields
            continue
        if "accounting storage is disabled" in result.stderr.lower() + result.stdout.lower():
            report.notes.append(f"{source}: accounting storage is disabled on this cluster")
        else:
            report.notes.append(result.note.replace("sacct ", f"{source} ", 1) if completion else result.note)
        break
    return report


def merge_report(report: SlurmReport, part: SlurmReport) -> None:
    report.notes.extend(part.notes)
    for source in part.sources:
        if source not in report.sources:
            report.sources.append(source)


def job_states(
    job_ids: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT,
    now: float | None = None,
) -> SlurmReport:  # fmt: skip
    """The state of each job, from the first source that knows it: squeue, then scontrol, then
    sacct, then sacct -c. Ids no source knows are in `missing`, with a note."""
    asked = list(dict.fromkeys(str(j).strip() for j in job_ids if str(j).strip()))
    report = SlurmReport()
    job_ids = [j for j in asked if JOB_ID.fullmatch(j)]
    for bad in (j for j in asked if not JOB_ID.fullmatch(j)):
        report.notes.append(f"job {bad[:40]!r}: not a SLURM job id")
        report.missing.append(bad)
    if not job_ids:
        return report
    queue = squeue(job_ids, env=env, timeout=timeout, now=now)
    merge_report(report, queue)
    report.jobs.extend(queue.jobs)
    look_further(report, job_ids, controller_down=queue_down(queue), env=env, timeout=timeout)
    return report


def queue_down(queue: SlurmReport) -> bool:
    return not queue.sources and any("no answer within" in n or "Unable to contact" in n for n in queue.notes)


def look_further(
    report: SlurmReport, job_ids: Sequence[str], *, controller_down: bool, env: Mapping[str, str] | None, timeout: float
) -> None:
    """Ask scontrol (unless the controller is down), sacct and sacct -c about the ids `report` lacks."""
    missing = [j for j in job_ids if not _found(report.jobs, j)]
    if missing and controller_down:
        report.notes.append("scontrol: skipped (the controller did not answer squeue)")
    elif missing:
        part = scontrol_jobs(missing, env=env, timeout=timeout)
        merge_report(report, part)
        report.jobs.extend(part.jobs)
        missing = [j for j in missing if not _found(report.jobs, j)]
    for completion in (False, True):
        if not missing:
            break
        part = sacct_jobs(missing, completion=completion, env=env, timeout=timeout)
        merge_report(report, part)
        report.jobs.extend(part.jobs)
        missing = [j for j in missing if not _found(report.jobs, j)]
    for job_id in missing:
        report.notes.append(f"job {job_id}: unknown to {', '.join(report.sources) or 'every SLURM command'}")
    report.missing += missing


# ---------------------------------------------------------------------------------------------
# time limit


def time_limit_eta(
    *, step: int, max_steps: int, seconds_per_step: float | None, elapsed_s: float | None, time_limit_s: float | None,
    now: datetime | None = None,
) -> TimeLimitEta:  # fmt: skip
    """Whether a job at `step` of `max_steps`, taking `seconds_per_step`, reaches max_steps before
    its time limit (`elapsed_s` of `time_limit_s` used). When the limit comes first it says the last
    step completed before the kill and when the kill comes (`now` + remaining; SLURM may act up to
    OverTimeLimit plus ~30 s later, since it checks limits periodically)."""
    steps_left = max(0, max_steps - step)
    if steps_left == 0:
        return TimeLimitEta(will_hit_limit=False, steps_left=0, note="already at max_steps")
    rate_ok = seconds_per_step is not None and math.isfinite(seconds_per_step) and seconds_per_step > 0
    finish_in = steps_left * seconds_per_step if rate_ok and seconds_per_step else None
    finish_at = now + timedelta(seconds=finish_in) if now is not None and finish_in is not None else None
    if time_limit_s is None or not math.isfinite(time_limit_s):
        return TimeLimitEta(
            will_hit_limit=False, steps_left=steps_left, finish_in_s=finish_in, finish_at=finish_at, note="no time limit"
        )
    if elapsed_s is None or not math.isfinite(elapsed_s):
        return TimeLimitEta(
            will_hit_limit=None, steps_left=steps_left, finish_in_s=finish_in, finish_at=finish_at, note="elapsed time unknown"
        )
    remaining = max(0.0, time_limit_s - elapsed_s)
    kill_at = now + timedelta(seconds=remaining) if now is not None else None
    if finish_in is None or not seconds_per_step:
        return TimeLimitEta(
            will_hit_limit=None, steps_left=steps_left, remaining_s=remaining, kill_at=kill_at,
            note="no step rate: cannot tell whether the time limit comes first",
        )  # fmt: skip
    margin = remaining - finish_in
    if margin >= 0:
        return TimeLimitEta(
            will_hit_limit=False, steps_left=steps_left, remaining_s=remaining, finish_in_s=finish_in, margin_s=margin,
            finish_at=finish_at, note=f"finishes {margin:.0f} s before its time limit",
        )  # fmt: skip
    last_step = step + math.floor(remaining / seconds_per_step + 1e-9)
    return TimeLimitEta(
        will_hit_limit=True, steps_left=steps_left, remaining_s=remaining, finish_in_s=finish_in, margin_s=margin,
        last_step_before_kill=last_step, kill_in_s=remaining, kill_at=kill_at,
        note=f"killed at its time limit after step {last_step} of {max_steps} ({max_steps - last_step} steps short)",
    )  # fmt: skip
