"""The check-in report (DESIGN.md interfaces): a check-in's state as the JSON that `rlagent check
--json` prints and that replays, evals and the CLI's summary line read. A pure function."""

from __future__ import annotations

from datetime import UTC

from rlagent.agents.llm.runtime import llm_report
from rlagent.models.actions import ApprovalRequest
from rlagent.models.state import CheckinState
from rlagent.tools.untrusted import scrub


def build_report(state: CheckinState, pending: ApprovalRequest | None = None) -> dict:
    """The JSON report; `pending` is the decision the check-in waits for."""
    obs = state.out.observation
    assert obs is not None
    step = obs.trainer_step if obs.trainer_step is not None else obs.orchestrator_step
    report = {
        "run_dir": state.run.run_dir,
        "layout": state.run.layout.value,
        "picked_from": state.run.picked_from,
        "checkin": state.checkin,
        "checked_at": obs.now.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "step": step,
        "max_steps": state.memory.config.max_steps,
        "health": state.out.health.value if state.out.health else None,
        "findings": [
            f.model_dump(
                mode="json", include={"id", "severity", "category", "summary", "evidence", "first_step", "last_step", "source"}
            )
            for f in state.out.findings
        ],
        "proposal": state.out.proposal.model_dump(mode="json") if state.out.proposal else None,
        "proposal_notes": state.out.proposal_notes,
        "reviews": [r.model_dump(mode="json") for r in state.out.reviews],
        "pending": pending.model_dump(mode="json") if pending else None,
        "launch": state.out.launch.model_dump(mode="json") if state.out.launch else None,
        "status_entry": state.out.status_entry,
        "written": state.out.written,
        "write_error": state.out.write_error,
        "notes": obs.notes,
        "samples": [r.model_dump(mode="json") for r in obs.rollouts],
        "llm": llm_report(state.out.llm),
    }
    return scrub(report)  # findings, notes and samples quote logs and rollouts: no control sequence reaches stdout
