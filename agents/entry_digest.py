"""An entry's content as a key, so that a redone check-in is neither dropped nor duplicated.

A check-in killed after appending its entry but before its state was saved is done again with
the same number. If the redo read the same bytes and reached the same judgement, its entry is
the one already written (a newer clock or RAM reading is no news) and nothing is appended. If
the run changed meanwhile (more steps, a new attempt, a process gone), the redo's entry differs
and is appended as a correction: what the redo saw is never silently dropped.
"""

from __future__ import annotations

import hashlib
import json

from rlagent.models.state import CheckinState


def entry_digest(state: CheckinState) -> str:
    """12 hex digits over what the entry reports: the data read (each file's offset), the steps,
    the attempt, health, findings, notes, samples and the proposal; not the time of the check-in."""
    obs = state.out.observation
    assert obs is not None, "the collector runs before the writer"
    proposal = state.out.proposal
    substance = {
        "read": sorted((rel, c.inode, c.offset) for rel, c in state.memory.cursors.items()),
        "attempt": [obs.attempt, obs.new_attempt],
        "steps": [obs.trainer_step, obs.orchestrator_step],
        "health": state.out.health.value if state.out.health else None,
        "findings": sorted((f.id, f.severity.value) for f in state.out.findings),
        "notes": sorted(set(obs.notes)),
        "samples": obs.rollouts_step,
        "processes": None if obs.live.processes is None else sorted(p.role for p in obs.live.processes),
        "proposal": None if proposal is None else [proposal.action.value, proposal.resume_step],
    }
    blob = json.dumps(substance, sort_keys=True, default=str).encode()
    return hashlib.blake2b(blob, digest_size=6).hexdigest()
