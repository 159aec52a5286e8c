"""rlagent.tools.slurm against a real private single-node SLURM cluster (tests/slurmkit.py): real
sbatch jobs (bash loops writing job_<id>.log), read back through squeue --json, scontrol, sacct
and sacct -c. Skipped when SLURM and munge are not installed.

The TIMEOUT job is submitted when the first test asks for it and checked by the last test of this
file: SLURM's smallest time limit is one minute and its controller checks limits every 30 s, so
that job takes 60 to 90 s; the other tests run meanwhile."""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rlagent.models.slurm import SlurmJob, SlurmReport
from rlagent.tools import slurm, slurm_jobs, slurm_parse

import slurmkit
from slurmkit import SlurmCluster, free_ports, slurm_cluster  # noqa: F401

TIMEOUT = 10.0  # per SLURM command in these tests (the daemons answer in milliseconds)

LOOP = """#!/bin/bash
#SBATCH --job-name={name}
#SBATCH --output={output}
echo "start $SLURM_JOB_ID"
i=0
while [ $i -lt {steps} ]; do echo "step $i"; i=$((i+1)); sleep {pause}; done
echo "done"
exit {code}
"""


def write_script(
    run_dir: Path, name: str | None = None, *, steps: int = 100000, pause: float = 0.2, code: int = 0, file: str = "job.sh"
) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    script = run_dir / file
    name = name or f"rlt-{uuid.uuid4().hex[:8]}"
    script.write_text(LOOP.format(name=name, output=run_dir / "job_%j.log", steps=steps, pause=pause, code=code))
    return script


def states(cluster: SlurmCluster, *job_ids: str) -> SlurmReport:
    return slurm.job_states(list(job_ids), env=cluster.env, timeout=TIMEOUT)


def one(report: SlurmReport, job_id: str) -> SlurmJob:
    job = report.job(job_id)
    assert job is not None, f"job {job_id} not reported: {report.model_dump(exclude={'jobs'})}"
    return job


def wait_lines(path: Path, count: int, timeout: float = 20.0) -> list[str]:
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    while time.monotonic() < deadline:
        if path.exists():
            lines = path.read_text().splitlines()
            if len(lines) >= count:
                return lines
        time.sleep(0.1)
    raise AssertionError(f"{path} has {len(lines)} lines after {timeout} s, wanted {count}")


@pytest.fixture(scope="module")
def timeout_job(slurm_cluster, tmp_path_factory):  # noqa: F811
    """A job with the smallest time limit (1 minute) that would loop for 500 s: submitted once,
    checked RUNNING by the first test and TIMEOUT by the last."""
    run_dir = tmp_path_factory.mktemp("timeout-run")
    script = write_script(run_dir, "rlt-timeout", steps=1000, pause=0.5)
    job_id = slurm_cluster.sbatch("--time=1", str(script), cwd=run_dir)
    yield run_dir, job_id
    slurm_cluster.run("scancel", job_id, check=False)


def test_running_job_state_node_time_limit_log_and_eta(slurm_cluster, timeout_job, tmp_path):  # noqa: F811
    run_dir = tmp_path / "run"
    job_id = slurm_cluster.sbatch(
        "--time=5", "--comment", f"rlagent {run_dir}", str(write_script(run_dir, "rlt-running")), cwd=run_dir
    )
    slurm_cluster.wait_state(job_id, ["RUNNING"])
    log = run_dir / f"job_{job_id}.log"
    wait_lines(log, 3)

    report = states(slurm_cluster, job_id)
    assert report.sources == ["squeue --json"] and report.missing == [] and report.notes == []
    job = one(report, job_id)
    assert (job.state, job.reason, job.name, job.source) == ("RUNNING", None, "rlt-running", "squeue --json")
    assert (job.nodes, job.node_count, job.partition, job.user) == ("localhost", 1, "debug", "root")
    assert job.time_limit_s == 300
    assert job.work_dir == str(run_dir)
    assert job.comment == f"rlagent {run_dir}"
    assert job.std_out == str(log)  # squeue --json gives job_%j.log: expanded here
    assert job.exit_code == 0 and job.active
    now = datetime.now(UTC)
    assert job.submit_time <= job.start_time <= now
    assert abs((job.end_time - job.start_time).total_seconds() - 300) <= 1
    assert 0 <= job.elapsed_s <= (now - job.start_time).total_seconds() + 1

    time.sleep(1.2)
    later = one(states(slurm_cluster, job_id), job_id)
    assert later.elapsed_s >= job.elapsed_s + 1

    # scontrol says the same (and expands the log path itself)
    sc = one(slurm.scontrol_jobs([job_id], env=slurm_cluster.env, timeout=TIMEOUT), job_id)
    assert (sc.state, sc.std_out, sc.time_limit_s, sc.work_dir, sc.requeue, sc.restarts) == (
        "RUNNING",
        str(log),
        300,
        str(run_dir),
        True,
        0,
    )
    assert sc.comment == f"rlagent {run_dir}"
    assert sc.start_time == job.start_time

    # the 1-minute job: running, and at 0.5 s a step it cannot reach step 1000 before its limit
    timeout_dir, timeout_id = timeout_job
    slurm_cluster.wait_state(timeout_id, ["RUNNING"])
    steps = [line for line in wait_lines(timeout_dir / f"job_{timeout_id}.log", 3) if line.startswith("step ")]
    tjob = one(states(slurm_cluster, timeout_id), timeout_id)
    tnow = datetime.now(UTC)
    assert (tjob.state, tjob.time_limit_s) == ("RUNNING", 60)
    eta = slurm.time_limit_eta(
        step=len(steps), max_steps=1000, seconds_per_step=0.5, elapsed_s=tjob.elapsed_s, time_limit_s=tjob.time_limit_s, now=tnow
    )
    assert eta.will_hit_limit is True
    assert abs((eta.kill_at - tjob.end_time).total_seconds()) <= 3  # the limit SLURM itself reports
    assert len(steps) < eta.last_step_before_kill <= len(steps) + 121
    slurm_cluster.run("scancel", job_id)


def test_pending_on_a_dependency_then_never_satisfied(slurm_cluster, tmp_path):  # noqa: F811
    first = slurm_cluster.sbatch(str(write_script(tmp_path / "a")), cwd=tmp_path)
    second = slurm_cluster.sbatch(f"--dependency=afterok:{first}", str(write_script(tmp_path / "b")), cwd=tmp_path)
    slurm_cluster.wait_state(first, ["RUNNING"])

    report = states(slurm_cluster, first, second)
    job = one(report, second)
    assert (job.state, job.reason, job.nodes, job.elapsed_s) == ("PENDING", "Dependency", None, 0)
    assert job.dependency == f"afterok:{first}(unfulfilled)"
    assert one(report, first).state == "RUNNING"

    slurm_cluster.run("scancel", first)
    deadline = time.monotonic() + 20
    while slurm_cluster.scontrol_field(second, "Reason") != "DependencyNeverSatisfied" and time.monotonic() < deadline:
        time.sleep(0.2)
    job = one(states(slurm_cluster, second), second)
    assert (job.state, job.reason) == ("PENDING", "DependencyNeverSatisfied")
    slurm_cluster.run("scancel", second)


def wait_reason(cluster: SlurmCluster, job_id: str, reason: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while cluster.scontrol_field(job_id, "Reason") != reason:
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id}: Reason={cluster.scontrol_field(job_id, 'Reason')}, wanted {reason}")
        time.sleep(0.2)


def test_pending_beyond_the_partition_time_limit_says_why(slurm_cluster, tmp_path):  # noqa: F811
    job_id = slurm_cluster.sbatch("--time=45", str(write_script(tmp_path)), cwd=tmp_path)  # MaxTime is 30 minutes
    wait_reason(slurm_cluster, job_id, "PartitionTimeLimit")  # PartitionConfig first, for a moment
    job = one(states(slurm_cluster, job_id), job_id)
    assert (job.state, job.reason, job.time_limit_s, job.nodes) == ("PENDING", "PartitionTimeLimit", 45 * 60, None)
    slurm_cluster.run("scancel", job_id)


def test_more_cpus_than_the_node_has_pends_with_partition_config(slurm_cluster, tmp_path):  # noqa: F811
    """SLURM accepts the job (EnforcePartLimits=NO) and leaves it pending for ever."""
    cpus = slurm_cluster.node["CPUs"] + 1
    job_id = slurm_cluster.sbatch(f"--cpus-per-task={cpus}", str(write_script(tmp_path)), cwd=tmp_path)
    wait_reason(slurm_cluster, job_id, "PartitionConfig")
    time.sleep(1.5)  # a scheduling pass later it is still waiting
    job = one(states(slurm_cluster, job_id), job_id)
    assert (job.state, job.reason, job.elapsed_s) == ("PENDING", "PartitionConfig", 0)
    slurm_cluster.run("scancel", job_id)


def test_cancelled_job_and_its_completion_record(slurm_cluster, tmp_path):  # noqa: F811
    job_id = slurm_cluster.sbatch(str(write_script(tmp_path)), cwd=tmp_path)
    slurm_cluster.wait_state(job_id, ["RUNNING"])
    wait_lines(tmp_path / f"job_{job_id}.log", 2)
    slurm_cluster.run("scancel", job_id)
    slurm_cluster.wait_state(job_id, ["CANCELLED"])

    job = one(states(slurm_cluster, job_id), job_id)
    assert (job.state, job.exit_code, job.exit_signal, job.active) == ("CANCELLED", 0, 15, False)
    assert job.end_time is not None and job.elapsed_s >= 0

    comp = slurm.sacct_jobs([job_id], completion=True, env=slurm_cluster.env, timeout=TIMEOUT)
    assert comp.sources == ["sacct -c"]
    assert one(comp, job_id).state == "CANCELLED"


def test_failed_job_exit_code_from_squeue_scontrol_and_sacct_c(slurm_cluster, tmp_path):  # noqa: F811
    job_id = slurm_cluster.sbatch(str(write_script(tmp_path, "rlt-fails", steps=3, pause=0.05, code=3)), cwd=tmp_path)
    slurm_cluster.wait_state(job_id, ["FAILED"])
    assert wait_lines(tmp_path / f"job_{job_id}.log", 5)[-1] == "done"

    for job in (
        one(states(slurm_cluster, job_id), job_id),
        one(slurm.scontrol_jobs([job_id], env=slurm_cluster.env, timeout=TIMEOUT), job_id),
        one(slurm.sacct_jobs([job_id], completion=True, env=slurm_cluster.env, timeout=TIMEOUT), job_id),
    ):
        assert (job.state, job.exit_code, job.exit_signal, job.name) == ("FAILED", 3, 0, "rlt-fails"), job.source
        assert job.work_dir == str(tmp_path) and job.elapsed_s < 10, job.source
    # accounting is off: plain sacct says so and finds nothing
    acct = slurm.sacct_jobs([job_id], env=slurm_cluster.env, timeout=TIMEOUT)
    assert acct.jobs == [] and acct.notes == ["sacct: accounting storage is disabled on this cluster"]


def test_only_sacct_c_left_still_gives_the_final_state(slurm_cluster, tmp_path):  # noqa: F811
    """squeue and scontrol unavailable (a PATH with only sacct): the cascade reaches sacct -c."""
    job_id = slurm_cluster.sbatch("--wrap", "exit 4", "-o", str(tmp_path / "out_%j.log"), cwd=tmp_path)
    slurm_cluster.wait_state(job_id, ["FAILED"])
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "sacct").symlink_to(slurm_cluster.bin["sacct"])
    env = {**slurm_cluster.env, "PATH": str(bindir)}

    report = slurm.job_states([job_id], env=env, timeout=TIMEOUT)
    assert report.sources == ["sacct -c"]
    assert report.notes == [
        "squeue: not found on PATH",
        "scontrol: not found on PATH",
        "sacct: accounting storage is disabled on this cluster",
    ]
    job = one(report, job_id)
    assert (job.state, job.exit_code, job.source, job.work_dir) == ("FAILED", 4, "sacct -c", str(tmp_path))


def test_unknown_job_id_is_a_note_not_an_error(slurm_cluster, tmp_path):  # noqa: F811
    newest = slurm_cluster.sbatch("--wrap", "true", "-o", "/dev/null", cwd=tmp_path)
    gone = str(int(newest) + 100000)
    report = states(slurm_cluster, gone)
    assert report.jobs == [] and report.missing == [gone]
    assert report.sources == ["squeue --json", "scontrol", "sacct -c"]
    assert f"job {gone}: unknown to squeue --json, scontrol, sacct -c" in report.notes
    # one known, one unknown: the known one is still reported
    both = states(slurm_cluster, newest, gone)
    assert [j.raw_job_id for j in both.jobs] == [newest] and both.missing == [gone]


def test_two_jobs_of_one_run_and_not_the_other_runs_job(slurm_cluster, tmp_path):  # noqa: F811
    """prime-rl style: rl.sbatch in the run dir, output run_dir/job_%j.log, submitted from the
    project dir; resubmitted once. Another run's job has the same job name."""
    project, run_dir, other = tmp_path / "project", tmp_path / "outputs" / "run-a", tmp_path / "outputs" / "run-b"
    project.mkdir()
    name = f"rlt-rl-{uuid.uuid4().hex[:6]}"
    first = slurm_cluster.sbatch(str(write_script(run_dir, name, file="rl.sbatch")), cwd=project)
    theirs = slurm_cluster.sbatch(str(write_script(other, name, file="rl.sbatch")), cwd=project)
    slurm_cluster.wait_state(first, ["RUNNING"])
    slurm_cluster.run("scancel", first)
    slurm_cluster.wait_state(first, ["CANCELLED"])
    second = slurm_cluster.sbatch(str(run_dir / "rl.sbatch"), cwd=project)
    slurm_cluster.wait_state(second, ["RUNNING"])
    wait_lines(run_dir / f"job_{second}.log", 1)

    report = slurm_jobs.find_run_jobs(run_dir, env=slurm_cluster.env, timeout=TIMEOUT)
    assert [j.job_id for j in report.jobs] == [first, second]
    assert [j.state for j in report.jobs] == ["CANCELLED", "RUNNING"]
    for job in report.jobs:
        assert job.matched_by == [f"log_file:job_{job.job_id}.log", "sbatch:rl.sbatch", "std_out"]
        assert job.work_dir == str(project)
    assert report.sources == ["squeue --json"] and report.missing == []

    theirs_report = slurm_jobs.find_run_jobs(other, env=slurm_cluster.env, timeout=TIMEOUT)
    assert [j.job_id for j in theirs_report.jobs] == [theirs]
    slurm_cluster.run("scancel", second, theirs)


def test_run_jobs_found_by_work_dir_and_comment_without_log_files(slurm_cluster, tmp_path):  # noqa: F811
    run_dir = tmp_path / "run-c"
    run_dir.mkdir()
    elsewhere = tmp_path / "logs"
    elsewhere.mkdir()
    in_dir = slurm_cluster.sbatch("--wrap", "sleep 300", "-o", str(elsewhere / "a_%j.out"), cwd=run_dir)
    by_comment = slurm_cluster.sbatch(
        "--wrap", "sleep 300", "-o", str(elsewhere / "b_%j.out"), "--comment", f"run={run_dir}", cwd=elsewhere
    )
    report = slurm_jobs.find_run_jobs(run_dir, env=slurm_cluster.env, timeout=TIMEOUT)
    assert {j.job_id: j.matched_by for j in report.jobs} == {in_dir: ["work_dir"], by_comment: ["comment"]}
    slurm_cluster.run("scancel", in_dir, by_comment)


def test_finished_job_known_only_by_its_log_file(slurm_cluster, tmp_path):  # noqa: F811
    """A job_<id>.log whose job squeue no longer holds (here: an id SLURM never gave out) is
    reported missing with a note, and the run's live jobs are still found."""
    run_dir = tmp_path / "run-d"
    live = slurm_cluster.sbatch(str(write_script(run_dir)), cwd=run_dir)
    old = str(int(live) + 50000)
    (run_dir / f"job_{old}.log").write_text("step 1\n")
    report = slurm_jobs.find_run_jobs(run_dir, env=slurm_cluster.env, timeout=TIMEOUT)
    assert [j.job_id for j in report.jobs] == [live]
    assert report.missing == [old]
    assert any(note.startswith(f"job {old}: unknown to squeue --json, scontrol") for note in report.notes)
    slurm_cluster.run("scancel", live)


def test_controller_down_is_bounded_and_sacct_c_still_answers(slurm_cluster, tmp_path):  # noqa: F811
    """A slurm.conf naming a port nobody listens on: squeue cannot reach a controller; the call
    returns within its timeout, scontrol is skipped, the completion log still answers."""
    job_id = slurm_cluster.sbatch("--wrap", "exit 5", "-o", "/dev/null", cwd=tmp_path)
    slurm_cluster.wait_state(job_id, ["FAILED"])
    conf = tmp_path / "slurm.conf"
    conf.write_text(re.sub(r"(?m)^SlurmctldPort=\d+", f"SlurmctldPort={free_ports(1)[0]}", slurm_cluster.conf.read_text()))
    env = {**slurm_cluster.env, "SLURM_CONF": str(conf)}

    started = time.monotonic()
    report = slurm.job_states([job_id], env=env, timeout=3)
    took = time.monotonic() - started
    assert took < 3 * 3 + 2  # squeue, sacct, sacct -c: each bounded; scontrol not tried
    assert report.notes[0].startswith("squeue --json")
    assert "scontrol: skipped (the controller did not answer squeue)" in report.notes
    assert one(report, job_id).state == "FAILED" and report.sources == ["sacct -c"]


def test_timeout_job_ends_timeout_at_its_time_limit(slurm_cluster, timeout_job):  # noqa: F811
    """Last in this file: the job submitted by the first test hits its 1-minute limit."""
    run_dir, job_id = timeout_job
    started = slurm_cluster.scontrol_field(job_id, "StartTime")
    slurm_cluster.wait_state(job_id, ["TIMEOUT"], timeout=110)

    job = one(states(slurm_cluster, job_id), job_id)
    assert (job.state, job.reason, job.time_limit_s, job.exit_signal) == ("TIMEOUT", "TimeLimit", 60, 15)
    assert job.start_time == slurm_parse.parse_slurm_time(started)
    assert 60 <= job.elapsed_s <= 95  # the controller checks limits every 30 s
    log = (run_dir / f"job_{job_id}.log").read_text().splitlines()
    assert re.search(rf"\*\*\* JOB {job_id} ON \S+ CANCELLED AT \S+ DUE TO TIME LIMIT \*\*\*", log[-1])
    assert "done" not in log
    comp = one(slurm.sacct_jobs([job_id], completion=True, env=slurm_cluster.env, timeout=TIMEOUT), job_id)
    assert (comp.state, comp.time_limit_s) == ("TIMEOUT", 60)


def test_teardown_leaves_no_daemon_of_a_second_cluster():
    """start_cluster/stop on a cluster of its own: every process it started is gone by pid."""
    if slurmkit.unavailable_reason():
        pytest.skip(slurmkit.unavailable_reason())
    root = slurmkit.make_root()
    try:
        cluster = slurmkit.start_cluster(root)
        pids = [p.pid for p in cluster.procs.values()]
        job = cluster.sbatch("--wrap", "sleep 300", "-o", "/dev/null")
        cluster.wait_state(job, ["RUNNING"])
        assert cluster.startup_s < 15
        cluster.stop()
        assert all(p.poll() is not None for p in cluster.procs.values())
        assert slurmkit.tagged_processes(cluster.env[slurmkit.TAG]) == []
        assert not any(os.path.exists(f"/proc/{pid}") and _alive(pid) for pid in pids)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
