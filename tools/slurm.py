"""Reading SLURM job state: `squeue --json` (or `squeue -o` where --json is unsupported),
`scontrol -o show job`, `sacct`, and `sacct -c` (the job completion log, for clusters whose
accounting is off). Every command runs without a shell, with a bounded timeout, in its own
process group (a hung command and its children are killed). A missing command, a timeout, a
non-zero exit, garbage output or an unknown job id becomes a note in the SlurmReport; nothing
here raises on them.

The commands run with `TZ=UTC` and `SLURM_TIME_FORMAT=standard`, so the times they print are read
as UTC whatever the caller's zone or time format.

Measured on SLURM 22.05.8 (Debian 12): `squeue --json` (openapi v0.0.38) ignores `-j`/`-u`/`-t`
and prints every job the controller holds, finished ones included, with `standard_output` as the
raw `%j` pattern and `exit_code` as a wait status (768 = exit 3, 15 = signal 15); later versions
wrap numbers as `{"set", "infinite", "number"}` and states in lists. Both shapes are read here.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rlagent.models.slurm import SlurmJob, SlurmReport, TimeLimitEta

DEFAULT_TIMEOUT = 5.0
MAX_SCONTROL_CALLS = 16
JOB_ID = re.compile(r"\d+(?:_\d+)?")  # a job, or a task of an array job
SEP = "\x1f"  # field separator of the text formats: never in a job name, path or comment
_NULLS = frozenset({"", "(null)", "None", "none", "N/A", "n/a", "Unknown", "NONE", "(None)"})
_NO_VAL = 0xFFFFFFFE  # 32-bit NO_VAL; INFINITE is 0xFFFFFFFF

# squeue -o fields; the comment last (split with a bound, so a stray separator cannot shift others).
SQUEUE_FIELDS = (
    ("%i", "job_id"), ("%A", "raw_job_id"), ("%F", "array_job_id"), ("%K", "array_task_id"), ("%j", "name"),
    ("%T", "state"), ("%r", "reason"), ("%P", "partition"), ("%u", "user"), ("%D", "node_count"), ("%N", "nodes"),
    ("%M", "elapsed"), ("%l", "time_limit"), ("%V", "submit_time"), ("%S", "start_time"), ("%e", "end_time"),
    ("%Z", "work_dir"), ("%k", "comment"),
)  # fmt: skip
SQUEUE_FORMAT = SEP.join(code for code, _ in SQUEUE_FIELDS)
SACCT_FIELDS = (
    "JobID", "JobIDRaw", "JobName", "State", "ExitCode", "ElapsedRaw", "TimelimitRaw", "Submit", "Start", "End",
    "NodeList", "NNodes", "Partition", "User", "WorkDir", "Reason", "Comment",
)  # fmt: skip
SACCT_BASIC_FIELDS = (
    "JobID",
    "JobIDRaw",
    "JobName",
    "State",
    "ExitCode",
    "ElapsedRaw",
    "TimelimitRaw",
    "Start",
    "End",
    "NodeList",
)

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
# value parsers


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return None if text in _NULLS else text


def parse_duration(text: str | None) -> float | None:
    """Seconds in `[D-][HH:]MM:SS[.fff]` (squeue, scontrol, sacct); None for UNLIMITED, INVALID, N/A
    and anything else."""
    text = _text(text)
    if not text:
        return None
    match = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)", text)
    if not match:
        match_days = re.fullmatch(r"(\d+)-(\d+)", text)  # D-HH
        if match_days:
            return int(match_days.group(1)) * 86400 + int(match_days.group(2)) * 3600.0
        return None
    days, hours, minutes, seconds = match.groups()
    return int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)


def parse_slurm_time(text: str | None) -> datetime | None:
    """A SLURM timestamp (`2026-11-23T18:28:02`, printed in UTC here) as an aware datetime."""
    text = _text(text)
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def parse_exit_code(text: str | None) -> tuple[int | None, int | None]:
    """`3:0` -> (3, 0): the exit status and the signal that ended the job."""
    text = _text(text)
    match = re.fullmatch(r"(-?\d+):(\d+)", text or "")
    if not match:
        return None, None
    return int(match.group(1)), int(match.group(2))


def _state(text: Any) -> str | None:
    """`CANCELLED by 0` / `CANCELLED+` -> `CANCELLED`."""
    text = _text(text)
    if not text:
        return None
    return text.split()[0].rstrip("+").upper()


def _int(text: Any) -> int | None:
    text = _text(text)
    if text and re.fullmatch(r"-?\d+", text):
        return int(text)
    return None


def _user(text: Any) -> str | None:
    """`root(0)` -> `root`."""
    text = _text(text)
    return re.sub(r"\(\d+\)$", "", text) if text else None


def expand_output_pattern(
    pattern: str, *, job_id: str, array_job_id: str | None = None, task_id: str | None = None, name: str | None = None,
    user: str | None = None, node: str | None = None,
) -> str:  # fmt: skip
    """Expand sbatch's filename patterns (`%j`, `%A`, `%a`, `%x`, `%u`, `%N`, `%%`, zero-padded `%4j`)."""
    values = {
        "j": job_id, "J": job_id, "A": array_job_id or job_id, "a": task_id if task_id is not None else "4294967294",
        "x": name or "", "u": user or "", "N": (node or "").split(",")[0].split("[")[0], "n": "0", "t": "0", "s": "batch",
    }  # fmt: skip

    def repl(match: re.Match[str]) -> str:
        width, code = match.group(1), match.group(2)
        if code == "%":
            return "%"
        value = values[code]
        return value.zfill(int(width)) if width and value.isdigit() else value

    return re.sub(r"%(\d*)([jJAaxuNnts%])", repl, pattern)


# ---------------------------------------------------------------------------------------------
# squeue --json


def _jnum(value: Any) -> float | None:
    """A JSON number of any SLURM version: plain, or `{"set": bool, "infinite": bool, "number": n}`.
    None for unset, infinite and the NO_VAL/INFINITE sentinels."""
    if isinstance(value, dict):
        if value.get("infinite") or value.get("set") is False:
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value >= _NO_VAL or value < 0:
        return None
    return float(value)


def _jtime(value: Any) -> datetime | None:
    seconds = _jnum(value)
    if not seconds:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _jstr(value: Any) -> str | None:
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, dict | list):
        return None
    return _text(value)


def _jid(value: Any) -> str | None:
    number = _jnum(value)
    return str(int(number)) if number is not None else None


def _jexit(value: Any) -> tuple[int | None, int | None]:
    """A wait status int (22.05: 768 = exit 3, 15 = signal 15) or the newer dict."""
    if isinstance(value, dict):
        code = _jnum(value.get("return_code"))
        sig = value.get("signal")
        sig_id = _jnum(sig.get("id") if isinstance(sig, dict) else sig)
        return (int(code) if code is not None else None), (int(sig_id) if sig_id is not None else 0)
    raw = _jnum(value)
    if raw is None:
        return None, None
    raw_int = int(raw)
    return (raw_int >> 8) & 0xFF, raw_int & 0x7F


def _job_from_json(raw: dict[str, Any], now: float) -> SlurmJob:
    raw_id = _jid(raw.get("job_id"))
    if raw_id is None:
        raise ValueError("no job_id")
    array_job = _jid(raw.get("array_job_id"))
    array_job = array_job if array_job and array_job != "0" else None
    task = _jid(raw.get("array_task_id"))
    task_string = _jstr(raw.get("array_task_string"))
    if array_job and task is not None:
        job_id = f"{array_job}_{task}"
    elif array_job and task_string:
        job_id, task = f"{array_job}_[{task_string}]", task_string
    else:
        job_id = raw_id
    state = _state(_jstr(raw.get("job_state")))
    start, end = _jtime(raw.get("start_time")), _jtime(raw.get("end_time"))
    elapsed = None
    if state == "PENDING":
        elapsed = 0.0
    elif start is not None and state in {"RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING"}:
        elapsed = max(0.0, now - start.timestamp())
    elif start is not None and end is not None:
        elapsed = max(0.0, (end - start).total_seconds())
    limit = _jnum(raw.get("time_limit"))
    exit_code, exit_signal = _jexit(raw.get("exit_code"))
    work_dir = _jstr(raw.get("current_working_directory"))
    name = _jstr(raw.get("name"))
    user = _jstr(raw.get("user_name"))
    nodes = _jstr(raw.get("nodes"))
    node_count = _jnum(raw.get("node_count"))
    restarts = _jnum(raw.get("restart_cnt"))
    requeue = raw.get("requeue")

    def stream(key: str) -> str | None:
        pattern = _jstr(raw.get(key))
        if pattern is None:
            if key == "standard_error" or not raw.get("batch_flag"):
                return None
            pattern = "slurm-%A_%a.out" if array_job else "slurm-%j.out"  # sbatch's default
        if task is not None and not task.isdigit():
            path = pattern  # tasks not yet split off: their %a has no value yet
        else:
            path = expand_output_pattern(
                pattern, job_id=raw_id, array_job_id=array_job, task_id=task, name=name, user=user, node=nodes
            )
        if work_dir and not os.path.isabs(path):
            path = os.path.join(work_dir, path)
        return path

    return SlurmJob(
        job_id=job_id,
        raw_job_id=raw_id,
        array_job_id=array_job,
        array_task_id=task,
        name=name,
        state=state,
        reason=_jstr(raw.get("state_reason")),
        partition=_jstr(raw.get("partition")),
        user=user,
        nodes=nodes,
        node_count=int(node_count) if node_count is not None else None,
        elapsed_s=elapsed,
        time_limit_s=limit * 60 if limit is not None else None,
        exit_code=exit_code,
        exit_signal=exit_signal,
        work_dir=work_dir,
        comment=_jstr(raw.get("comment")),
        submit_time=_jtime(raw.get("submit_time")),
        start_time=start,
        end_time=end,
        std_out=stream("standard_output"),
        std_err=stream("standard_error"),
        dependency=_jstr(raw.get("dependency")),
        requeue=requeue if isinstance(requeue, bool) else None,
        restarts=int(restarts) if restarts is not None else None,
        source="squeue --json",
    )


def parse_squeue_json(text: str, now: float | None = None) -> tuple[list[SlurmJob], list[str]]:
    """Jobs of `squeue --json`; malformed records are skipped with a note."""
    now = time.time() if now is None else now
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return [], [f"squeue --json: output is not JSON ({_preview(text)})"]
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        return [], [f"squeue --json: no job list in the output ({_preview(text)})"]
    notes = [f"squeue --json error: {_preview(json.dumps(err))}" for err in data.get("errors") or [] if err]
    jobs, bad = [], 0
    for raw in data["jobs"]:
        try:
            if not isinstance(raw, dict):
                raise TypeError("not an object")
            jobs.append(_job_from_json(raw, now))
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError):
            bad += 1
    if bad:
        notes.append(f"squeue --json: skipped {bad} malformed job record(s)")
    return jobs, notes


def _preview(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    if not text:
        return "empty"
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


# ---------------------------------------------------------------------------------------------
# squeue -o


def parse_squeue_text(text: str) -> tuple[list[SlurmJob], list[str]]:
    """Jobs of `squeue -h -o SQUEUE_FORMAT`; lines that do not have every field are skipped."""
    jobs, bad = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split(SEP, len(SQUEUE_FIELDS) - 1)
        if len(parts) != len(SQUEUE_FIELDS) or not _text(parts[0]):
            bad += 1
            continue
        row = {key: value.strip() for (_, key), value in zip(SQUEUE_FIELDS, parts, strict=True)}
        array_job, task = _text(row["array_job_id"]), _text(row["array_task_id"])
        if task is None:
            array_job = None
        elapsed = parse_duration(row["elapsed"])
        jobs.append(
            SlurmJob(
                job_id=row["job_id"],
                raw_job_id=_text(row["raw_job_id"]),
                array_job_id=array_job,
                array_task_id=task,
                name=_text(row["name"]),
                state=_state(row["state"]),
                reason=_text(row["reason"]),
                partition=_text(row["partition"]),
                user=_user(row["user"]),
                nodes=_text(row["nodes"]),
                node_count=_int(row["node_count"]),
                elapsed_s=elapsed,
                time_limit_s=parse_duration(row["time_limit"]),
                work_dir=_text(row["work_dir"]),
                comment=_text(row["comment"]),
                submit_time=parse_slurm_time(row["submit_time"]),
                start_time=parse_slurm_time(row["start_time"]),
                end_time=parse_slurm_time(row["end_time"]),
                source="squeue",
            )
        )
    notes = [f"squeue: skipped {bad} unreadable line(s)"] if bad else []
    return jobs, notes


# ---------------------------------------------------------------------------------------------
# scontrol -o show job

_SCONTROL_KEY = re.compile(r"(?:^|\s)([A-Z][A-Za-z0-9_/:]*)=")


def parse_scontrol_record(text: str) -> dict[str, str]:
    """`Key=Value Key=Value ...` of one scontrol record. Values may hold spaces (a Comment, a
    JobName); a key starts with a capital letter after whitespace, so `Comment=run=/x y` stays whole,
    while a value holding ` Capital=` is cut there."""
    matches = list(_SCONTROL_KEY.finditer(text))
    fields: dict[str, str] = {}
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        fields.setdefault(match.group(1), text[match.end() : end].strip())
    return fields


def parse_scontrol_jobs(text: str) -> tuple[list[SlurmJob], list[str]]:
    """Jobs of `scontrol -o show job` (one line each) or of its multi-line form."""
    records: list[str] = []
    stray = 0
    for line in text.splitlines():
        if line.lstrip().startswith("JobId="):
            records.append(line)
        elif line.strip() and records and line[:1].isspace():
            records[-1] += " " + line
        elif line.strip():
            stray += 1
    jobs, bad = [], 0
    for record in records:
        fields = parse_scontrol_record(record)
        raw_id = _text(fields.get("JobId"))
        if raw_id is None or not re.fullmatch(r"\d+", raw_id):
            bad += 1
            continue
        array_job, task = _text(fields.get("ArrayJobId")), _text(fields.get("ArrayTaskId"))
        if array_job and task:
            job_id = f"{array_job}_{task}" if task.isdigit() else f"{array_job}_[{task}]"
        else:
            job_id, array_job, task = raw_id, None, None
        exit_code, exit_signal = parse_exit_code(fields.get("ExitCode"))
        requeue = _int(fields.get("Requeue"))
        node_count = _int((fields.get("NumNodes") or "").split("-")[0])
        jobs.append(
            SlurmJob(
                job_id=job_id,
                raw_job_id=raw_id,
                array_job_id=array_job,
                array_task_id=task,
                name=_text(fields.get("JobName")),
                state=_state(fields.get("JobState")),
                reason=_text(fields.get("Reason")),
                partition=_text(fields.get("Partition")),
                user=_user(fields.get("UserId")),
                nodes=_text(fields.get("NodeList")),
                node_count=node_count,
                elapsed_s=parse_duration(fields.get("RunTime")),
                time_limit_s=parse_duration(fields.get("TimeLimit")),
                exit_code=exit_code,
                exit_signal=exit_signal,
                work_dir=_text(fields.get("WorkDir")),
                comment=_text(fields.get("Comment")),
                submit_time=parse_slurm_time(fields.get("SubmitTime")),
                start_time=parse_slurm_time(fields.get("StartTime")),
                end_time=parse_slurm_time(fields.get("EndTime")),
                std_out=_text(fields.get("StdOut")),
                std_err=_text(fields.get("StdErr")),
                dependency=_text(fields.get("Dependency")),
                requeue=bool(requeue) if requeue is not None else None,
                restarts=_int(fields.get("Restarts")),
                source="scontrol",
            )
        )
    notes = []
    if bad:
        notes.append(f"scontrol: skipped {bad} record(s) without a numeric JobId")
    if stray and not jobs:
        notes.append(f"scontrol: no job record in the output ({_preview(text)})")
    return jobs, notes


# ---------------------------------------------------------------------------------------------
# sacct / sacct -c


def parse_sacct(text: str, fields: Sequence[str] = SACCT_FIELDS, source: str = "sacct") -> tuple[list[SlurmJob], list[str]]:
    """Jobs of `sacct -X -P -n --delimiter=SEP -o FIELDS`; job steps (`123.batch`) are skipped."""
    jobs, bad = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split(SEP, len(fields) - 1)
        if len(parts) != len(fields):
            bad += 1
            continue
        row = {key: value.strip() for key, value in zip(fields, parts, strict=True)}
        job_id = _text(row.get("JobID"))
        if not job_id or not re.fullmatch(r"\d+(?:_(?:\d+|\[[^\]]*\]))?(?:\+\d+)?(?:\.\S+)?", job_id):
            bad += 1
            continue
        if "." in job_id:
            continue
        array_job, _, task = job_id.partition("_")
        exit_code, exit_signal = parse_exit_code(row.get("ExitCode"))
        limit_min = _int(row.get("TimelimitRaw"))
        elapsed = _int(row.get("ElapsedRaw"))
        jobs.append(
            SlurmJob(
                job_id=job_id,
                raw_job_id=_text(row.get("JobIDRaw")),
                array_job_id=array_job if task else None,
                array_task_id=task.strip("[]") if task else None,
                name=_text(row.get("JobName")),
                state=_state(row.get("State")),
                reason=_text(row.get("Reason")),
                partition=_text(row.get("Partition")),
                user=_user(row.get("User")),
                nodes=_text(row.get("NodeList")),
                node_count=_int(row.get("NNodes")),
                elapsed_s=float(elapsed) if elapsed is not None else None,
                time_limit_s=limit_min * 60.0 if limit_min is not None else None,
                exit_code=exit_code,
                exit_signal=exit_signal,
                work_dir=_text(row.get("WorkDir")),
                comment=_text(row.get("Comment")),
                submit_time=parse_slurm_time(row.get("Submit")),
                start_time=parse_slurm_time(row.get("Start")),
                end_time=parse_slurm_time(row.get("End")),
                source=source,
            )
        )
    notes = [f"{source}: skipped {bad} unreadable line(s)"] if bad else []
    return jobs, notes


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


def _merge(report: SlurmReport, part: SlurmReport) -> None:
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
    _merge(report, queue)
    report.jobs.extend(queue.jobs)
    _look_further(report, job_ids, controller_down=_queue_down(queue), env=env, timeout=timeout)
    return report


def _queue_down(queue: SlurmReport) -> bool:
    return not queue.sources and any("no answer within" in n or "Unable to contact" in n for n in queue.notes)


def _look_further(
    report: SlurmReport, job_ids: Sequence[str], *, controller_down: bool, env: Mapping[str, str] | None, timeout: float
) -> None:
    """Ask scontrol (unless the controller is down), sacct and sacct -c about the ids `report` lacks."""
    missing = [j for j in job_ids if not _found(report.jobs, j)]
    if missing and controller_down:
        report.notes.append("scontrol: skipped (the controller did not answer squeue)")
    elif missing:
        part = scontrol_jobs(missing, env=env, timeout=timeout)
        _merge(report, part)
        report.jobs.extend(part.jobs)
        missing = [j for j in missing if not _found(report.jobs, j)]
    for completion in (False, True):
        if not missing:
            break
        part = sacct_jobs(missing, completion=completion, env=env, timeout=timeout)
        _merge(report, part)
        report.jobs.extend(part.jobs)
        missing = [j for j in missing if not _found(report.jobs, j)]
    for job_id in missing:
        report.notes.append(f"job {job_id}: unknown to {', '.join(report.sources) or 'every SLURM command'}")
    report.missing += missing


# ---------------------------------------------------------------------------------------------
# the jobs of a run dir

_LOG_NAMES = (re.compile(r"^job_(\d+(?:_\d+)?)\.log$"), re.compile(r"^slurm-(\d+(?:_\d+)?)\.out$"))


def job_ids_from_logs(run_dir: Path) -> dict[str, str]:
    """job id -> file name, for `job_<id>.log` (prime-rl's sbatch output) and `slurm-<id>.out`
    files in the run dir, oldest id first."""
    found: dict[str, str] = {}
    try:
        names = [entry.name for entry in os.scandir(run_dir) if entry.is_file()]
    except OSError:
        return {}
    for name in names:
        for pattern in _LOG_NAMES:
            match = pattern.match(name)
            if match:
                found[match.group(1)] = name
    return dict(sorted(found.items(), key=lambda item: [int(p) for p in item[0].split("_")]))


@dataclass(frozen=True)
class SbatchScript:
    """The `#SBATCH` directives of a batch script that identify its jobs."""

    path: Path
    job_name: str | None = None
    output: str | None = None
    error: str | None = None
    chdir: str | None = None
    comment: str | None = None
    time: str | None = None


_SBATCH_OPTIONS = {
    "--job-name": "job_name", "-J": "job_name", "--output": "output", "-o": "output", "--error": "error", "-e": "error",
    "--chdir": "chdir", "-D": "chdir", "--comment": "comment", "--time": "time", "-t": "time",
}  # fmt: skip


def parse_sbatch_script(text: str, path: Path = Path("script.sbatch")) -> SbatchScript:
    """Read `#SBATCH` lines as sbatch does: up to the first command line of the script."""
    found: dict[str, str] = {}
    for i, line in enumerate(text.splitlines()):
        stripped = line.strip()
        if i == 0 and stripped.startswith("#!"):
            continue
        if not stripped or (stripped.startswith("#") and not stripped.startswith("#SBATCH")):
            continue
        if not stripped.startswith("#SBATCH"):
            break
        try:
            words = shlex.split(stripped[len("#SBATCH") :], comments=True)
        except ValueError:
            words = stripped[len("#SBATCH") :].split()
        j = 0
        while j < len(words):
            word = words[j]
            key, eq, value = word.partition("=")
            if key in _SBATCH_OPTIONS and eq:
                found.setdefault(_SBATCH_OPTIONS[key], value)
            elif key in _SBATCH_OPTIONS and j + 1 < len(words):
                found.setdefault(_SBATCH_OPTIONS[key], words[j + 1])
                j += 1
            elif re.fullmatch(r"-[JoeDt]\S+", word):
                found.setdefault(_SBATCH_OPTIONS[word[:2]], word[2:])
            j += 1
    return SbatchScript(path=path, **found)


def find_sbatch_scripts(run_dir: Path, limit: int = 20) -> list[SbatchScript]:
    """Batch scripts in the run dir (not below): `*.sbatch`, `*.slurm`, or a `*.sh`/extensionless
    file under 1 MB with an `#SBATCH` line near its top."""
    scripts = []
    try:
        entries = sorted(os.scandir(run_dir), key=lambda e: e.name)
    except OSError:
        return []
    for entry in entries:
        if len(scripts) >= limit:
            break
        path = Path(entry.path)
        try:
            if not entry.is_file() or entry.stat().st_size > 1 << 20:
                continue
            if path.suffix not in {".sbatch", ".slurm", ".sh", ""}:
                continue
            with open(path, "rb") as handle:
                head = handle.read(8192)
        except OSError:
            continue
        if b"#SBATCH" not in head and path.suffix not in {".sbatch", ".slurm"}:
            continue
        scripts.append(parse_sbatch_script(head.decode("utf-8", errors="replace"), path))
    return scripts


def _same_path(a: str | None, b: Path | str | None) -> bool:
    if not a or b is None:
        return False
    return os.path.normpath(a) == os.path.normpath(str(b)) or os.path.realpath(a) == os.path.realpath(str(b))


def _in_dir(path: str | None, directory: Path) -> bool:
    return bool(path) and _same_path(os.path.dirname(os.path.normpath(path or "")), directory)


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """An sbatch output pattern as a regex matching both its expanded and its raw form."""
    out, pos = [], 0
    for match in re.finditer(r"%(\d*)([jJAaxuNnts%])", pattern):
        out.append(re.escape(pattern[pos : match.start()]))
        out.append("%" if match.group(2) == "%" else f"(?:{re.escape(match.group(0))}|[^/]*)")
        pos = match.end()
    out.append(re.escape(pattern[pos:]))
    return re.compile("".join(out))


def _script_matches(script: SbatchScript, job: SlurmJob, run_dir: Path) -> bool:
    if not script.job_name or job.name != script.job_name:
        return False
    if script.chdir:
        chdir = script.chdir if os.path.isabs(script.chdir) else os.path.join(run_dir, script.chdir)
        if job.work_dir and not _same_path(job.work_dir, chdir):
            return False
    if script.output and job.std_out:
        base = script.chdir or job.work_dir or str(run_dir)
        output = script.output if os.path.isabs(script.output) else os.path.join(base, script.output)
        if not _pattern_regex(os.path.normpath(output)).fullmatch(os.path.normpath(job.std_out)):
            return False
    return bool(script.chdir or script.output) or not _elsewhere(job, run_dir)


def _elsewhere(job: SlurmJob, run_dir: Path) -> bool:
    """The job writes outside the run dir and runs outside it: another run's job."""
    writes_elsewhere = bool(job.std_out) and not _in_dir(job.std_out, run_dir)
    return writes_elsewhere and bool(job.work_dir) and not _same_path(job.work_dir, run_dir)


def match_run_jobs(
    run_dir: Path, jobs: Iterable[SlurmJob], *, log_ids: Mapping[str, str] | None = None,
    scripts: Sequence[SbatchScript] = (),
) -> list[SlurmJob]:  # fmt: skip
    """The jobs that belong to the run dir, each a copy with `matched_by` saying why:
    `log_file:<name>` (a job_<id>.log in the run dir), `sbatch:<script>` (the script's job name, and
    its --output/--chdir when it sets them), `std_out` (stdout or stderr in the run dir),
    `work_dir` (runs in the run dir), `comment` (its comment holds the run dir's path), `name`
    (named like the run dir, and not writing and running elsewhere)."""
    run_dir = Path(os.path.normpath(run_dir))
    log_ids = log_ids or {}
    matched = []
    for job in jobs:
        why = [f"log_file:{log_ids[i]}" for i in sorted(job.ids()) if i in log_ids]
        why += [f"sbatch:{s.path.name}" for s in scripts if _script_matches(s, job, run_dir)]
        if _in_dir(job.std_out, run_dir) or _in_dir(job.std_err, run_dir):
            why.append("std_out")
        if _same_path(job.work_dir, run_dir):
            why.append("work_dir")
        if job.comment and str(run_dir) in job.comment:
            why.append("comment")
        if job.name and job.name == run_dir.name and not _elsewhere(job, run_dir):
            why.append("name")
        if why:
            matched.append(job.model_copy(update={"matched_by": why}))
    return matched


def _id_key(job: SlurmJob) -> tuple[int, str]:
    raw = job.raw_job_id or job.job_id.split("_")[0]
    return (int(raw) if raw.isdigit() else 1 << 62, job.job_id)


def find_run_jobs(
    run_dir: Path, *, user: str | None = None, env: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT,
    now: float | None = None,
) -> SlurmReport:  # fmt: skip
    """The run's SLURM jobs with their state: the jobs squeue holds that match the run dir (see
    match_run_jobs), plus the ids of its `job_<id>.log` files that squeue no longer holds, looked
    up in scontrol, sacct and sacct -c. Oldest job first."""
    run_dir = Path(os.path.abspath(run_dir))
    log_ids = job_ids_from_logs(run_dir)
    scripts = find_sbatch_scripts(run_dir)
    queue = squeue(None, user=user, env=env, timeout=timeout, now=now)
    report = SlurmReport()
    _merge(report, queue)
    report.jobs = match_run_jobs(run_dir, queue.jobs, log_ids=log_ids, scripts=scripts)
    found = len(report.jobs)
    _look_further(report, list(log_ids), controller_down=_queue_down(queue), env=env, timeout=timeout)
    report.jobs[found:] = [
        job.model_copy(update={"matched_by": [f"log_file:{log_ids[i]}" for i in sorted(job.ids()) if i in log_ids]})
        for job in report.jobs[found:]
    ]
    report.jobs.sort(key=_id_key)
    if not log_ids and not scripts and not report.jobs:
        report.notes.append(f"no SLURM job found for {run_dir} (no job_<id>.log, no sbatch script, no matching job in squeue)")
    return report


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
