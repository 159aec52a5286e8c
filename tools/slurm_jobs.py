"""The SLURM jobs of a run dir: ids from `job_<id>.log` / `slurm-<id>.out` files, the run's sbatch
scripts (`#SBATCH --job-name`, `--output`, `--chdir`), and jobs from the queue matched to the run by
working directory, output path, comment or name (each says how it was matched)."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rlagent.models.slurm import SlurmJob, SlurmReport
from rlagent.tools.slurm import DEFAULT_TIMEOUT, look_further, merge_report, queue_down, squeue

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
    merge_report(report, queue)
    report.jobs = match_run_jobs(run_dir, queue.jobs, log_ids=log_ids, scripts=scripts)
    found = len(report.jobs)
    look_further(report, list(log_ids), controller_down=queue_down(queue), env=env, timeout=timeout)
    report.jobs[found:] = [
        job.model_copy(update={"matched_by": [f"log_file:{log_ids[i]}" for i in sorted(job.ids()) if i in log_ids]})
        for job in report.jobs[found:]
    ]
    report.jobs.sort(key=_id_key)
    if not log_ids and not scripts and not report.jobs:
        report.notes.append(f"no SLURM job found for {run_dir} (no job_<id>.log, no sbatch script, no matching job in squeue)")
    return report
