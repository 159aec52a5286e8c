"""Parsing what SLURM prints: `squeue --json` (both the 22.05 shape and later versions' wrapped
numbers and state lists), `squeue -o` text, `scontrol -o show job` records and `sacct` rows, into
`SlurmJob`s. Pure functions of the text: nothing here runs a command (tools/slurm.py does).

Measured on SLURM 22.05.8 (Debian 12): `squeue --json` (openapi v0.0.38) prints every job the controller
holds, finished ones included, with `standard_output` as the raw `%j` pattern and `exit_code` as a wait
status (768 = exit 3, 15 = signal 15); later versions wrap numbers as `{"set", "infinite", "number"}` and
states in lists. Both shapes are read here.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rlagent.models.slurm import SlurmJob

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
