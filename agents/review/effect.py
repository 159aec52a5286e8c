"""The effect reviewer: would the action actually address what was found?

- a restart answers a run that is down (a crash, a dead process), never learning dynamics a
  restart replays (entropy collapse, reward hacking...);
- a stop answers a run that trains on NaN or hangs;
- every override is an allow-listed knob, within its range and at most a few-fold change, moved
  in the direction its finding calls for (OOM: smaller seq_len; truncation: more completion
  tokens), and completion tokens still fit in seq_len.
"""

from __future__ import annotations

from rlagent.agents.proposals import DOWN, NOT_FIXED_BY_RESTART, OVERRIDE_FOR, STOP_FOR
from rlagent.agents.review.protocol import ReviewPacket
from rlagent.models.actions import KNOBS, ActionKind, Check, Knob, Override, Verdict
from rlagent.models.run import Severity


class EffectReviewer:
    name = "effect reviewer"
    duty = "the action addresses the finding; overrides allowed and in range"

    def review(self, packet: ReviewPacket) -> Verdict:
        proposal = packet.proposal
        checks = [self._fits(packet)]
        if proposal.action is ActionKind.RESTART_WITH_OVERRIDES and not proposal.overrides:
            checks.append(Check(name="override_present", ok=False, detail="a config change without any override"))
        if proposal.action is ActionKind.RESTART and proposal.overrides:
            checks.append(Check(name="override_present", ok=False, detail="a plain restart carries overrides"))
        if proposal.action is ActionKind.STOP and proposal.overrides:
            checks.append(Check(name="override_present", ok=False, detail="a stop carries overrides"))
        for override in proposal.overrides:
            checks += [self._range(override), self._justified(override, proposal.addresses)]
        if proposal.overrides:
            checks.append(self._fits_seq_len(packet))
        return Verdict.from_checks(self.name, self.duty, checks)

    def _fits(self, packet: ReviewPacket) -> Check:
        proposal = packet.proposal
        primary = proposal.addresses[0] if proposal.addresses else ""
        by_id = {f.id: f for f in packet.findings}
        if primary in NOT_FIXED_BY_RESTART:
            return Check(name="action_fits", ok=False, detail=f"a {proposal.action.value} cannot fix {primary}")
        wanted = STOP_FOR if proposal.action is ActionKind.STOP else DOWN
        finding = by_id.get(primary)
        if primary not in wanted or finding is None or finding.severity is not Severity.CRITICAL:
            return Check(
                name="action_fits",
                ok=False,
                detail=f"a {proposal.action.value} answers a critical {' or '.join(wanted)}, not {primary or 'nothing'}",
            )
        return Check(name="action_fits", ok=True, detail=f"a {proposal.action.value} answers {primary} ({finding.summary[:100]})")

    def _range(self, override: Override) -> Check:
        spec = KNOBS[override.knob]
        name = override.knob.value
        if not spec.low <= override.value <= spec.high:
            return Check(
                name="override_range", ok=False, detail=f"{name} {override.text()} outside [{spec.low:g}, {spec.high:g}]"
            )
        if override.current:
            ratio = override.value / override.current
            if not 1 / spec.max_factor <= ratio <= spec.max_factor:
                return Check(
                    name="override_range",
                    ok=False,
                    detail=f"{name} {override.current:g} -> {override.text()} is more than a {spec.max_factor:g}x change",
                )
        return Check(name="override_range", ok=True, detail=f"{name} {override.text()} within [{spec.low:g}, {spec.high:g}]")

    def _justified(self, override: Override, addresses: list[str]) -> Check:
        name = override.knob.value
        for finding_id in addresses:
            knob, direction = OVERRIDE_FOR.get(finding_id, (None, 0))
            if knob is not override.knob:
                continue
            if override.current is None:
                return Check(name="override_direction", ok=False, detail=f"{name}: the run's current value is unknown")
            moved = (override.value - override.current) * direction
            if moved <= 0:
                way = "smaller" if direction < 0 else "larger"
                return Check(name="override_direction", ok=False, detail=f"{finding_id} calls for a {way} {name}")
            return Check(
                name="override_direction", ok=True, detail=f"{name} {override.current:g} -> {override.text()} for {finding_id}"
            )
        return Check(name="override_direction", ok=False, detail=f"no addressed finding calls for changing {name}")

    def _fits_seq_len(self, packet: ReviewPacket) -> Check:
        values = {o.knob: o.value for o in packet.proposal.overrides}
        seq_len = values.get(Knob.SEQ_LEN, packet.config.seq_len)
        completion = values.get(Knob.MAX_COMPLETION_TOKENS, packet.config.max_completion_tokens)
        if seq_len is not None and completion is not None and completion >= seq_len:
            return Check(
                name="override_consistent",
                ok=False,
                detail=f"max_completion_tokens {completion:g} does not fit seq_len {seq_len:g}",
            )
        return Check(name="override_consistent", ok=True, detail="completion tokens fit in seq_len")
