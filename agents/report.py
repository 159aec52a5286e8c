"""The check-in report (DESIGN.md interfaces): a check-in's state as the JSON that `rlagent check
--json` prints and that replays, evals and the CLI's summary line read. A pure function."""

from __future__ import annotations

from datetime import UTC

from rlagent.agents.llm.runtime import llm_report
from rlagent.models.actions import ApprovalRequest
from rlagent.models.observation import Observation
from rlagent.models.state import CheckinState
from rlagent.tools.untrusted import scrub


def build_report(state: CheckinState, pending: ApprovalRequest | None = None) -> dict:
    """The JSON report; `pending` is the decision the check-in waits for."""
    obs = state.out.observation
    assert obs is not None
    step = obs.trainer_step if obs.trainer_step is not None else obs.orchestrator_step
    report = {
        "run_dir": state.run.run_dir,
        "framework": state.run.framework.value,
        "layout": state.run.layout.value if state.run.layout else None,
        "picked_from": state.run.picked_from,
        "checkin": state.checkin,
        "checked_at": obs.now.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "step": step,
        "max_steps": state.memory.config.max_steps,
        "behind": list(obs.behind),  # files whose backlog is still being read: `step` is where the reading got to
        "health": state.out.health.value if state.out.health else None,
        "findings": [
            f.model_dump(
                mode="json", include={"id", "severity", "category", "summary", "evidence", "first_step", "last_step", "source"}
            )
            for f in state.out.findings
        ],
        "slurm": slurm_jobs(obs),
        "slurm_nodes": [node.model_dump(mode="json") for node in obs.live.node_processes or []],
        "proposal": state.out.proposal.model_dump(mode="json") if state.out.proposal else None,
        "proposal_notes": state.out.proposal_notes,
        "reviews": [r.model_dump(mode="json") for r in state.out.reviews],
        "pending": pending.model_dump(mode="json") if pending else None,
        "launch": state.out.launch.model_dump(mode="json") if state.out.launch else None,
        "status_entry": state.out.status_entry,
        "written": state.out.written,
        "write_error": state.out.write_error,
        "write_note": state.out.write_note,
        "notes": obs.notes,
        "samples": [r.model_dump(mode="json") for r in obs.rollouts],
        "llm": llm_report(state.out.llm),
    }
    return scrub(report)  # findings, notes and samples quote logs and rollouts: no control sequence reaches stdout


SLURM_FIELDS = ("job_id", "state", "reason", "nodes", "elapsed_s", "time_limit_s", "exit_code")


def slurm_jobs(obs: Observation) -> list[dict]:
    """The run's SLURM jobs (DESIGN.md: `job_id`, `state`, `reason`, `nodes`, `elapsed_s`,
    `time_limit_s`, `exit_code`), plus how each was matched and which command answered."""
    report = obs.live.slurm_jobs
    if report is None:
        return []
    return [
        {**job.model_dump(mode="json", include=set(SLURM_FIELDS)), "matched_by": job.matched_by, "source": job.source}
        for job in report.jobs
    ]
