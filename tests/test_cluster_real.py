"""rlagent on a real private SLURM cluster (tests/slurmkit.py): simulated prime-rl runs of both
layouts submitted with their own `rl.sbatch` (evals/simulator/multinode.py), checked in live
through the real graph: running (with its multi-node tree and the processes on its node, seen
with srun --overlap), pending, cancelled, failed with an exit code and killed at its time limit;
then a failed run resubmitted through review, approval and a real tmux Launcher window, and
verified. Skipped with a one-line reason where SLURM and munge are not installed.

Every job is submitted at once by a module fixture; the TIMEOUT job (60-90 s) is checked by the
last test, so the others run meanwhile."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import pytest

from rlagent.agents.rules.thresholds import Thresholds
from rlagent.evals.simulator.multinode import write_sbatch
from rlagent.graph.runner import ActionConfig, Effects, Monitor
from rlagent.models.actions import ActionKind, ApprovalMode, LaunchStatus
from rlagent.models.run import Health
from rlagent.tools.layout import discover_run
from rlagent.tools.slurm_probe import SlurmSettings, SystemCluster

from launchkit import tmux_servers, wait_for  # noqa: F401
from runbuilder import HRun
from slurmkit import SlurmCluster, slurm_cluster  # noqa: F401


def l_run(root: Path, name: str, max_steps: int = 1000) -> Path:
    run_dir = root / name
    (run_dir / "configs").mkdir(parents=True)
    (run_dir / "configs" / "trainer.toml").write_text(f"max_steps = {max_steps}\n")
    (run_dir / "configs" / "orchestrator.toml").write_text(f"max_steps = {max_steps}\nseq_len = 2048\n")
    (run_dir / "logs").mkdir()
    return run_dir


def submit(cluster: SlurmCluster, run_dir: Path, *args: str, layout: str = "H", **env: str) -> str:
    script = write_sbatch(run_dir, layout=layout, minutes=5)
    export = ",".join(["ALL", *(f"{k}={v}" for k, v in env.items())])
    return cluster.sbatch(f"--export={export}", *args, str(script), cwd=run_dir)


def check(cluster: SlurmCluster, run_dir: Path, home: Path, **actions):
    effects = Effects(cluster=SystemCluster(SlurmSettings(env=cluster.env, timeout=10)))
    action_config = ActionConfig(**actions) if actions else None
    # The host is probed for real; its free disk is this machine's, not the test's: never low here.
    roomy = Thresholds(disk_free_low=0.0)
    monitor = Monitor(discover_run(run_dir), home=home, effects=effects, actions=action_config, thresholds=roomy)
    try:
        state = monitor.check_in()
    finally:
        monitor.close()
    return state, {f.id: f for f in state.out.findings}


def report_of(state) -> list[dict]:
    from rlagent.agents.report import build_report

    return build_report(state)["slurm"]


@pytest.fixture(scope="module")
def jobs(slurm_cluster, tmp_path_factory):  # noqa: F811
    root = tmp_path_factory.mktemp("cluster-runs")
    runs = {
        "running-h": HRun(root, "running-h", max_steps=100).dir,
        "running-l": l_run(root, "running-l", max_steps=100),
        "pending": HRun(root, "pending-h").dir,
        "cancelled": HRun(root, "cancelled-h").dir,
        "failed": HRun(root, "failed-h").dir,
        "timeout": HRun(root, "timeout-h", max_steps=1000).dir,
    }
    ids = {
        "running-h": submit(slurm_cluster, runs["running-h"], SIMJOB_TREE="1", SIMJOB_PAUSE="0.5"),
        "running-l": submit(slurm_cluster, runs["running-l"], layout="L", SIMJOB_PAUSE="0.5"),
        "cancelled": submit(slurm_cluster, runs["cancelled"], SIMJOB_PAUSE="0.5"),
        "failed": submit(
            slurm_cluster, runs["failed"], SIMJOB_MODE="fail", SIMJOB_STEPS="3", SIMJOB_EXIT="3", SIMJOB_PAUSE="0.2"
        ),
        "timeout": submit(slurm_cluster, runs["timeout"], "--time=1", SIMJOB_PAUSE="1"),
    }
    ids["pending"] = submit(slurm_cluster, runs["pending"], f"--dependency=afterok:{ids['running-h']}")
    yield runs, ids
    for job_id in ids.values():
        slurm_cluster.run("scancel", job_id, check=False)


def test_a_running_multi_node_run_and_its_node_processes(slurm_cluster, jobs, tmp_path):  # noqa: F811
    runs, ids = jobs
    job_id = ids["running-h"]
    slurm_cluster.wait_state(job_id, ["RUNNING"])
    wait_for(lambda: (runs["running-h"] / "logs" / "attempt_2" / "trainer.log").exists(), 60, "the job's attempt", every=0.2)
    time.sleep(2.5)  # a few step lines
    state, found = check(slurm_cluster, runs["running-h"], tmp_path / "home")
    [job] = report_of(state)
    assert (job["job_id"], job["state"], job["reason"], job["nodes"], job["time_limit_s"]) == (
        job_id, "RUNNING", None, "localhost", 300,
    )  # fmt: skip
    assert job["exit_code"] == 0 and 0 <= job["elapsed_s"] < 120
    assert {f"log_file:job_{job_id}.log", "sbatch:rl.sbatch", "work_dir"} <= set(job["matched_by"])
    live = state.out.observation.live
    [node] = live.node_processes
    assert (node.node, node.via, node.ok) == ("localhost", "srun", True)  # srun --jobid J --overlap ps
    from rlagent.agents.report import build_report

    assert [(n["node"], n["via"]) for n in build_report(state)["slurm_nodes"]] == [("localhost", "srun")]
    assert "node localhost (via srun): " in state.out.status_entry
    view = state.out.observation.multinode
    assert view is not None and view.nodes("trainer") == [0, 1] and len([f for f in view.files if f.stream]) == 16
    assert state.out.health is Health.HEALTHY, state.out.findings
    assert not {"process_down", "slurm_pending", "slurm_job_failed", "rank_failed"} & set(found)
    assert json.dumps(report_of(state))  # plain JSON


def test_a_running_layout_l_run(slurm_cluster, jobs, tmp_path):  # noqa: F811
    runs, ids = jobs
    slurm_cluster.wait_state(ids["running-l"], ["RUNNING"])
    wait_for(lambda: (runs["running-l"] / "logs" / "trainer.log").exists(), 60, "the L trainer log", every=0.2)
    state, found = check(slurm_cluster, runs["running-l"], tmp_path / "home")
    assert [(j["job_id"], j["state"]) for j in report_of(state)] == [(ids["running-l"], "RUNNING")]
    assert state.run.layout.value == "L" and "slurm_job_failed" not in found


def test_a_pending_job_is_info_with_its_reason(slurm_cluster, jobs, tmp_path):  # noqa: F811
    runs, ids = jobs
    slurm_cluster.wait_state(ids["pending"], ["PENDING"])
    state, found = check(slurm_cluster, runs["pending"], tmp_path / "home")
    [job] = report_of(state)
    assert (job["state"], job["reason"], job["nodes"]) == ("PENDING", "Dependency", None)
    pending = found["slurm_pending"]
    assert pending.severity.value == "info" and "(Dependency)" in pending.summary and "not an error" in pending.summary
    assert "process_down" not in found  # nothing runs yet, by design


def test_a_cancelled_job(slurm_cluster, jobs, tmp_path):  # noqa: F811
    runs, ids = jobs
    slurm_cluster.wait_state(ids["cancelled"], ["RUNNING"])
    slurm_cluster.run("scancel", ids["cancelled"])
    slurm_cluster.wait_state(ids["cancelled"], ["CANCELLED"])
    state, found = check(slurm_cluster, runs["cancelled"], tmp_path / "home")
    assert [j["state"] for j in report_of(state)] == ["CANCELLED"]
    assert found["slurm_job_failed"].severity.value == "warning" and "cancelled" in found["slurm_job_failed"].summary
    assert state.out.health is Health.DOWN


def test_a_failed_job_with_its_exit_code(slurm_cluster, jobs, tmp_path):  # noqa: F811
    runs, ids = jobs
    slurm_cluster.wait_state(ids["failed"], ["FAILED"], timeout=40)
    state, found = check(slurm_cluster, runs["failed"], tmp_path / "home")
    [job] = report_of(state)
    assert (job["state"], job["exit_code"], job["reason"]) == ("FAILED", 3, "NonZeroExitCode")
    assert found["slurm_job_failed"].severity.value == "critical" and "exit code 3" in found["slurm_job_failed"].summary
    assert found["run_crashed"].severity.value == "critical"
    assert any(f"job_{ids['failed']}.log" in e and "exit code 3" in e for e in found["run_crashed"].evidence)
    assert state.out.health is Health.DOWN


def test_a_failed_run_is_resubmitted_approved_sent_and_verified(slurm_cluster, tmp_path, tmux_servers, monkeypatch):  # noqa: F811
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))  # the Launcher pane's sbatch and the auditor reach this cluster
    run = HRun(tmp_path, "resubmit-h", max_steps=100)
    run.steps(12)
    for step in (5, 10):
        for part, name in (("trainer", ".metadata"), ("orchestrator", "progress.pt")):
            (run.dir / "checkpoints" / f"step_{step}" / part).mkdir(parents=True)
            (run.dir / "checkpoints" / f"step_{step}" / part / name).write_text("x")
    first = submit(slurm_cluster, run.dir, SIMJOB_MODE="fail", SIMJOB_STEPS="2", SIMJOB_EXIT="3", SIMJOB_PAUSE="0.2")
    slurm_cluster.wait_state(first, ["FAILED"], timeout=40)
    tmux = tmux_servers()
    actions = ActionConfig(approve=ApprovalMode.ASK, target=tmux.target, verify_timeout_s=60, verify_poll_s=0.5)
    monitor = Monitor(discover_run(run.dir), home=tmp_path / "home", actions=actions)
    try:
        crashed = monitor.check_in()
        proposal = crashed.out.proposal
        assert proposal is not None and proposal.action is ActionKind.RESUBMIT, (crashed.out.proposal_notes, crashed.out.findings)
        assert proposal.resume_step == 10 and proposal.job_id == first
        assert crashed.out.reviews[-1].agreed, crashed.out.reviews[-1].verdicts
        request_id, request = monitor.pending()
        expected = shlex.join(["sbatch", str(run.dir.resolve() / "rl.sbatch"), "--run.name", "resubmit-h", "--resume.step", "10"])
        assert request.command == expected and request.action is ActionKind.RESUBMIT

        done = monitor.decide(True, by="test person", request_id=request_id)
        launch = done.out.launch
        assert launch.status is LaunchStatus.SENT and launch.sent == expected, launch
        assert launch.verification.ok, launch.verification
        names = [c.name for c in launch.verification.checks]
        assert names == ["new_job_running", "new_attempt", "step_advancing"]
        assert launch.verification.attempt == "attempt_3" and launch.verification.step > 10
        assert tmux.text().count(expected) == 1
        assert "resubmission verified" in run.status()
        after = monitor.check_in()
        states = {j.job_id: j.state for j in after.out.observation.live.slurm_jobs.jobs}
        assert states[first] == "FAILED" and sorted(states.values()) == ["FAILED", "RUNNING"]
        assert after.out.proposal is None and "slurm_job_failed" not in {f.id for f in after.out.findings}
    finally:
        monitor.close()
        slurm_cluster.run("scancel", "--name=resubmit-h", check=False)


def test_time_limit_risk_then_timeout(slurm_cluster, jobs, tmp_path):  # noqa: F811
    """Last: the 1-minute job is first predicted to hit its limit, then ends TIMEOUT."""
    runs, ids = jobs
    job_id = ids["timeout"]
    slurm_cluster.wait_state(job_id, ["RUNNING"])
    wait_for(lambda: (runs["timeout"] / "logs" / "attempt_2" / "trainer.log").exists(), 60, "the job's trainer log", every=0.2)
    time.sleep(4)
    state, found = check(slurm_cluster, runs["timeout"], tmp_path / "home")
    risk = found["time_limit_risk"]
    assert risk.severity.value == "critical" and f"SLURM job {job_id} hits its time limit 0:01:00" in risk.summary
    assert "steps short" in risk.summary and risk.last_step is not None and risk.last_step < 1000
    slurm_cluster.wait_state(job_id, ["TIMEOUT"], timeout=110)
    state, found = check(slurm_cluster, runs["timeout"], tmp_path / "home2")
    [job] = report_of(state)
    assert (job["state"], job["reason"], job["time_limit_s"]) == ("TIMEOUT", "TimeLimit", 60)
    assert found["slurm_timeout"].severity.value == "critical" and "killed at its time limit" in found["slurm_timeout"].summary
    assert found["run_crashed"].severity.value == "critical" and state.out.health is Health.DOWN


def test_a_hung_job_is_stopped_with_scancel_after_approval(slurm_cluster, tmp_path, tmux_servers, monkeypatch):  # noqa: F811
    """A job alive but silent past the stall threshold (set low, as a user may): `run_stalled`, a typed
    `stop` of its SLURM job, the review, a person's Yes, `scancel J` in the Launcher pane, the job ends."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))  # the Launcher pane's scancel reaches this cluster
    run = HRun(tmp_path, "hung-h", max_steps=100)
    job_id = submit(slurm_cluster, run.dir, SIMJOB_MODE="hang", SIMJOB_STEPS="5", SIMJOB_PAUSE="0.2")
    try:
        slurm_cluster.wait_state(job_id, ["RUNNING"])
        trainer = run.dir / "logs" / "attempt_2" / "trainer.log"
        wait_for(lambda: trainer.exists() and "Step 5 |" in trainer.read_text(), 60, "the job's 5 steps", every=0.2)
        time.sleep(7)  # silent past max(0.1 min, 3 x 0.2 s)
        tmux = tmux_servers()
        actions = ActionConfig(approve=ApprovalMode.ASK, target=tmux.target, verify_timeout_s=30, verify_poll_s=0.5)
        monitor = Monitor(
            discover_run(run.dir), home=tmp_path / "home", actions=actions, thresholds=Thresholds(stall_min_minutes=0.1)
        )
        try:
            hung = monitor.check_in()
            found = {f.id: f for f in hung.out.findings}
            assert found["run_stalled"].severity.value == "critical", hung.out.findings
            proposal = hung.out.proposal
            assert proposal is not None and proposal.action is ActionKind.STOP and proposal.job_id == job_id
            assert hung.out.reviews[-1].agreed, hung.out.reviews[-1].verdicts
            request_id, request = monitor.pending()
            assert request.command == f"scancel {job_id}" and request.action is ActionKind.STOP
            assert request.source == f"scancel of the run's SLURM job {job_id}"
            assert slurm_cluster.scontrol_field(job_id, "JobState") == "RUNNING"  # nothing before the Yes

            done = monitor.decide(True, by="test person", request_id=request_id)
            launch = done.out.launch
            assert launch.status is LaunchStatus.SENT and launch.sent == request.command, launch
            assert launch.verification.ok, launch.verification
            assert [c.name for c in launch.verification.checks] == ["job_ended"]
            assert slurm_cluster.wait_state(job_id, ["CANCELLED"]) == "CANCELLED"
            assert tmux.text().count(request.command) == 1
            assert f"scancel of the run's SLURM job {job_id}" in run.status()
        finally:
            monitor.close()
    finally:
        slurm_cluster.run("scancel", job_id, check=False)
