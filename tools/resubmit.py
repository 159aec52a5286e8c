"""Restarting a SLURM run: `sbatch` of the run's own batch script with prime-rl's resume flags,
and `scancel` of a hung job. Pure functions plus a read of the run dir's scripts; nothing here
runs a command (the command goes to the Launcher window, after review and a person's approval).

sbatch passes the words after the script to the script as "$@", so a script whose `rl` line ends
in "$@" resumes with them: H `--run.name <name> --resume.step N`, L `--output-dir <dir>
--ckpt.resume-step N` (prime-rl-formats.md section 9), plus typed overrides. A script that does not
forward its arguments cannot take resume flags: rlagent then says so (re-running the launcher's
`rl` command on the login node, prime-rl's own way, remains the `restart` action's job).
"""

from __future__ import annotations

import re
from pathlib import Path

from rlagent.models.actions import KNOBS, Override
from rlagent.tools.launch_command import CommandError, check_argv
from rlagent.tools.slurm_jobs import find_sbatch_scripts
from rlagent.tools.slurm_parse import JOB_ID

_FORWARDS = re.compile(r'"\$@"|\$\{@\}|"\$\{@\}"')


def resubmit_script(run_dir: Path) -> tuple[Path | None, str]:
    """(the run's batch script that forwards its arguments, or None; why not)."""
    scripts = find_sbatch_scripts(run_dir)
    if not scripts:
        return None, f"no sbatch script in {run_dir}"
    for script in sorted(scripts, key=lambda s: (s.path.name != "rl.sbatch", s.path.name)):
        try:
            text = script.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if _FORWARDS.search(text):
            return script.path, ""
    names = ", ".join(s.path.name for s in scripts)
    return None, f'{names}: does not pass its arguments ("$@") on to rl, so it cannot take resume flags'


def resume_flags(*, layout: str, run_dir: str, run_name: str, resume_step: int, overrides: list[Override] = ()) -> list[str]:  # type: ignore[assignment]
    flags = ["--run.name", run_name, "--resume.step", str(resume_step)]
    if layout != "H":
        flags = ["--output-dir", run_dir, "--ckpt.resume-step", str(resume_step)]
    for override in overrides:
        flags += [KNOBS[override.knob].flag(layout), override.text()]
    return flags


def build_resubmit_argv(
    script: Path, *, layout: str, run_dir: str, run_name: str, resume_step: int, overrides: list[Override] = (),  # type: ignore[assignment]
    max_steps: int | None = None,
) -> list[str]:  # fmt: skip
    """`sbatch <script> <resume flags>`; CommandError when no safe command can be built."""
    if resume_step < 1:
        raise CommandError(f"resume step must be >= 1, got {resume_step}")
    if max_steps is not None and resume_step >= max_steps:
        raise CommandError(f"checkpoint step {resume_step} is not before max_steps {max_steps}: the run is done")
    argv = ["sbatch", str(script)]
    argv += resume_flags(layout=layout, run_dir=run_dir, run_name=run_name, resume_step=resume_step, overrides=overrides)
    check_argv(argv)
    return argv


def scancel_argv(job_id: str) -> list[str]:
    if not JOB_ID.fullmatch(job_id or ""):
        raise CommandError(f"{job_id!r} is not a SLURM job id")
    return ["scancel", job_id]
