"""The cluster rules on typed SLURM reports: each state maps to its finding, pending reasons are
info unless they never clear, and the time-limit prediction names the step and the time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rlagent.agents.rules import RuleContext, health_of, run_rules
from rlagent.models.observation import LiveProbes, MetricHistory, Observation
from rlagent.models.run import Health, RunConfig
from rlagent.models.slurm import SlurmJob, SlurmReport

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def ctx(*jobs: SlurmJob, steps: int = 0, step_s: float = 60.0, max_steps: int = 100) -> RuleContext:
    history = MetricHistory(trainer={s: {"step_time": step_s, "loss": 0.1} for s in range(1, steps + 1)})
    report = SlurmReport(jobs=list(jobs))
    live = LiveProbes(processes=[], slurm_jobs=report, slurm={j.job_id: j.state or "" for j in jobs})
    return RuleContext(
        observation=Observation(now=NOW, offline=False, live=live, trainer_step=steps or None),
        history=history,
        config=RunConfig(max_steps=max_steps),
    )


def found(context: RuleContext) -> dict:
    return {f.id: f for f in run_rules(context)}


@pytest.mark.parametrize(
    ("state", "extra", "finding", "severity"),
    [
        ("FAILED", {"exit_code": 3}, "slurm_job_failed", "critical"),
        ("CANCELLED", {}, "slurm_job_failed", "warning"),
        ("TIMEOUT", {"time_limit_s": 3600, "elapsed_s": 3600}, "slurm_timeout", "critical"),
        ("NODE_FAIL", {"nodes": "gpu[1-4]"}, "node_fail", "critical"),
        ("OUT_OF_MEMORY", {}, "slurm_oom", "critical"),
        ("PREEMPTED", {}, "slurm_preempted", "warning"),
    ],
)
def test_each_end_state_maps_to_its_finding(state, extra, finding, severity):
    context = ctx(SlurmJob(job_id="12", state=state, **extra), steps=5)
    result = found(context)
    assert result[finding].severity.value == severity
    if state not in ("PREEMPTED",):
        assert health_of(result.values(), context) is Health.DOWN


def test_a_newer_running_job_supersedes_the_failed_one():
    result = found(ctx(SlurmJob(job_id="12", state="FAILED"), SlurmJob(job_id="13", state="RUNNING", time_limit_s=None), steps=5))
    assert not {"slurm_job_failed", "run_crashed", "process_down"} & set(result)


def test_pending_reasons():
    assert found(ctx(SlurmJob(job_id="1", state="PENDING", reason="Priority")))["slurm_pending"].severity.value == "info"
    stuck = found(ctx(SlurmJob(job_id="1", state="PENDING", reason="PartitionTimeLimit")))["slurm_pending"]
    assert stuck.severity.value == "warning" and "will not start" in stuck.summary


def test_time_limit_risk_names_the_step_and_the_time():
    job = SlurmJob(job_id="9", state="RUNNING", elapsed_s=3 * 3600, time_limit_s=4 * 3600)
    risk = found(ctx(job, steps=40, step_s=120.0, max_steps=200))["time_limit_risk"]
    # 1 h left at 120 s a step: 30 more steps, killed after step 70 at 13:00 UTC
    assert risk.severity.value == "warning"  # an hour away: time to act, not yet critical
    assert "at 2026-11-20 13:00 UTC" in risk.summary and "after step 70 of 200" in risk.summary
    assert risk.last_step == 70
    roomy = SlurmJob(job_id="9", state="RUNNING", elapsed_s=0, time_limit_s=48 * 3600)
    assert "time_limit_risk" not in found(ctx(roomy, steps=40, step_s=120.0, max_steps=200))
