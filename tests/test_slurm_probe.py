"""tools.slurm_probe and tools.resubmit on bad input, with fake SLURM commands on a private PATH:
squeue missing, slow, garbage or failing; a job id gone; two jobs for one run; a node srun cannot
reach. Each is a note, never a traceback or a hang."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rlagent.models.actions import Knob, Override
from rlagent.models.slurm import SlurmJob
from rlagent.tools import slurm_probe
from rlagent.tools.launch_command import CommandError
from rlagent.tools.resubmit import build_resubmit_argv, resubmit_script, scancel_argv
from rlagent.tools.slurm_probe import SlurmSettings, probe_cluster, probe_nodes


def fake_bin(tmp_path: Path, **scripts: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body + "\n")
        path.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_CONF": str(tmp_path / "slurm.conf")}


def run_dir(tmp_path: Path, *job_ids: str) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    for job_id in job_ids:
        (run / f"job_{job_id}.log").write_text("x\n")
    return run


def squeue_json(*jobs: dict) -> str:
    return "cat <<'EOF'\n" + json.dumps({"jobs": list(jobs)}) + "\nEOF"


def job(job_id: int, state: str, work_dir: Path, **extra) -> dict:
    return {"job_id": job_id, "job_state": state, "name": "run", "current_working_directory": str(work_dir), **extra}


def test_no_slurm_at_all_is_silent(tmp_path):
    env = {"PATH": str(tmp_path / "empty")}
    assert probe_cluster(run_dir(tmp_path), SlurmSettings(env=env)) is None


def test_squeue_missing_with_a_job_log_is_a_note(tmp_path):
    state = probe_cluster(run_dir(tmp_path, "41"), SlurmSettings(env={"PATH": str(tmp_path / "empty")}))
    assert state is not None and state.report.jobs == []
    assert state.notes == ["SLURM: squeue is not on PATH; the job(s) of job_41.log cannot be looked up"]


def test_slow_squeue_is_bounded(tmp_path):
    env = fake_bin(tmp_path, squeue="sleep 30", scontrol="sleep 30", sacct="sleep 30")
    started = time.monotonic()
    state = probe_cluster(run_dir(tmp_path, "7"), SlurmSettings(env=env, timeout=0.5))
    assert time.monotonic() - started < 4
    assert any("no answer within 0.5 s" in n for n in state.notes)
    assert "scontrol: skipped (the controller did not answer squeue)" in state.notes


def test_garbage_and_errors_are_notes(tmp_path):
    env = fake_bin(
        tmp_path,
        squeue="echo '%%garbage{{'",
        scontrol="echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1",
        sacct="echo 'sacct: error: Slurm accounting storage is disabled' >&2; exit 1",
    )
    state = probe_cluster(run_dir(tmp_path, "7"), SlurmSettings(env=env, timeout=2))
    assert state.report.jobs == [] and state.report.missing == ["7"]
    assert any("not JSON" in n for n in state.notes)
    assert any("job 7: unknown to" in n for n in state.notes)  # the job id that no longer exists


def test_two_active_jobs_for_one_run_are_said(tmp_path):
    run = run_dir(tmp_path)
    env = fake_bin(tmp_path, squeue=squeue_json(job(11, "RUNNING", run, nodes="n1"), job(12, "PENDING", run)), srun="exit 1")
    state = probe_cluster(run, SlurmSettings(env=env, timeout=2, probe_nodes=False))
    assert [j.job_id for j in state.report.jobs] == ["11", "12"]
    assert "2 SLURM jobs are active for this run (11 RUNNING, 12 PENDING): they write the same run dir" in state.notes


def test_a_node_srun_cannot_reach_is_a_note_and_ssh_is_said(tmp_path):
    env = fake_bin(tmp_path, srun="echo 'srun: error: Unable to create step for job 5: Invalid job id specified' >&2; exit 1")
    running = SlurmJob(job_id="5", state="RUNNING", nodes="gpu1")
    nodes, notes = probe_nodes(running, SlurmSettings(env=env, timeout=2))
    assert nodes is None
    assert notes[0].startswith("processes on the nodes of job 5 not probed (srun --jobid 5 --overlap exited 1: srun: error")
    assert notes[0].endswith("ssh not configured)")
    env = fake_bin(tmp_path, ssh="echo 'ssh: connect to host gpu1 port 22: Connection refused' >&2; exit 255")
    nodes, notes = probe_nodes(running, SlurmSettings(env=env, timeout=2, ssh=True))
    assert [(n.node, n.via, n.ok) for n in nodes] == [("gpu1", "ssh", False)] and "Connection refused" in nodes[0].note


def test_srun_output_per_node(tmp_path):
    env = fake_bin(
        tmp_path,
        srun="printf '0: PRIME-RL::Trainer\\n0: bash\\n1: PRIME-RL::Inference --secret-arg\\n'",
        scontrol="echo gpu1; echo gpu2",
    )
    nodes, notes = probe_nodes(SlurmJob(job_id="5", state="RUNNING", nodes="gpu[1-2]"), SlurmSettings(env=env, timeout=2))
    assert notes == []
    assert [(n.node, n.via, n.titles) for n in nodes] == [
        ("gpu1", "srun", ["PRIME-RL::Trainer"]),
        ("gpu2", "srun", ["PRIME-RL::Inference"]),
    ]


def test_resubmit_command_is_the_runs_own_script_with_resume_flags(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert resubmit_script(run) == (None, f"no sbatch script in {run}")
    (run / "rl.sbatch").write_text("#!/bin/bash\n#SBATCH --job-name=x\nuv run rl @ rl.toml\n")
    assert "does not pass its arguments" in resubmit_script(run)[1]
    (run / "rl.sbatch").write_text('#!/bin/bash\n#SBATCH --job-name=x\nuv run rl @ rl.toml "$@"\n')
    script, _ = resubmit_script(run)
    assert build_resubmit_argv(script, layout="H", run_dir=str(run), run_name="x", resume_step=10) == [
        "sbatch", str(script), "--run.name", "x", "--resume.step", "10",
    ]  # fmt: skip
    seq = Override(knob=Knob.SEQ_LEN, value=1536, current=2048)
    assert build_resubmit_argv(script, layout="L", run_dir=str(run), run_name="x", resume_step=4, overrides=[seq])[2:] == [
        "--output-dir", str(run), "--ckpt.resume-step", "4", "--seq-len", "1536",
    ]  # fmt: skip
    with pytest.raises(CommandError):
        build_resubmit_argv(script, layout="H", run_dir=str(run), run_name="x", resume_step=10, max_steps=10)
    assert scancel_argv("123_4") == ["scancel", "123_4"]
    with pytest.raises(CommandError):
        scancel_argv("12; rm -rf /")


def test_titles_never_carry_arguments():
    assert slurm_probe.titles_of(["PRIME-RL::Trainer --token=abc", "python x.py", ""]) == ["PRIME-RL::Trainer"]
