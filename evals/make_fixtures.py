"""Make the simulated-run fixtures under evals/fixtures/ from the simulator, table-driven.

    python -m rlagent.evals.make_fixtures                 # re-make all
    python -m rlagent.evals.make_fixtures 16_nan-h nan-l  # just these (name or slug)
    python -m rlagent.evals.make_fixtures --list

The rows are the case table (evals/fixture_table.py: which scenario, which edits, which findings);
this module builds each: the run written by the simulator, the edits applied, the check-in
schedule, each expected finding's `by_checkin` from the moment its signal is unambiguous
(evals/fixture_signals.py), and the health per check-in. Output is deterministic: re-making
gives the same bytes, and manifest.json carries the mtimes git drops. Re-make after a simulator
change (a test compares).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from rlagent.evals.case import Case, CheckinAt, Expect, HealthPhase
from rlagent.evals.casewriter import render_case
from rlagent.evals.cut import RecordedRun
from rlagent.evals.fixture import CASE, FIXTURES, RUN
from rlagent.evals.fixture_signals import T, Want
from rlagent.evals.fixture_table import TABLE, Spec
from rlagent.evals.manifest import MANIFEST, build_manifest, utc
from rlagent.evals.messy import Recording
from rlagent.evals.replay import schedule
from rlagent.evals.simulator import SCENARIOS, Scenario, write_run
from rlagent.evals.simulator.expectations import DOWN_IDS, INFO_IDS
from rlagent.models.run import Health

__all__ = ["TABLE", "build", "main", "make", "scenario_of"]

SMALL: dict[str, dict[str, object]] = {
    # Fewer rollouts per step and evals, rollouts saved for the last step only: about 1 MB a run.
    "H": {"batch_size": 16, "group_size": 8, "eval_examples": 8, "eval_k": 2, "rollout_steps_kept": 1},
    "L": {"batch_size": 16, "group_size": 8, "eval_examples": 8, "eval_k": 2, "rollout_steps_kept": 3},
}


# --- making one fixture ---------------------------------------------------------------------------


def scenario_of(spec: Spec) -> Scenario:
    base = SCENARIOS[spec.scenario]
    layout = str(spec.changes.get("layout", base.layout))
    return base.variant(**{**SMALL[layout], **spec.changes})


def _normal_rates(slug: str, rec: Recording) -> None:
    """A healthy row forbids env_errors, errored_rollouts_high and truncation_high: its realized
    numbers must stay on the normal side of those thresholds (a few % errored or truncated
    rollouts, findings.md), or the fixture would call a correct report a false alarm."""
    dyn, sc = rec.sim.dyn, rec.scenario
    err = trunc = 0
    for n in range(1, sc.steps + 1):
        st = dyn.at(n)
        window = range(max(1, n - T.event_window_steps + 1), n + 1)
        share = sum(dyn.at(k).failed for k in window) / (len(window) * sc.batch_size)
        if n >= T.sustain_steps and share > T.errored_high:
            raise ValueError(f"{slug}: {share:.1%} of the rollouts of steps {window[0]}-{n} failed (env_errors)")
        err = err + 1 if st.error > T.errored_high else 0
        trunc = trunc + 1 if st.truncation > T.truncation_high else 0
        if max(err, trunc) >= T.sustain_steps:
            raise ValueError(f"{slug}: errored or truncated rollouts above the limit for {T.sustain_steps} steps at {n}")


def _schedule(spec: Spec, rec: Recording, run: RecordedRun) -> list[CheckinAt]:
    """Every `spec.every` trainer steps, at the marks, then the tail (or the end), in time order."""
    last = run.last_step("trainer") or 0
    timed: list[tuple[float, CheckinAt]] = []
    for n in range(spec.every, last + 1, spec.every):
        seen = run.step_time(n, "trainer")
        assert seen is not None
        timed.append((seen + 1.0, CheckinAt(step=n)))
    for mark, after in spec.at_marks:
        moment = round(rec.marks[mark] + after)
        timed.append((moment, CheckinAt(at=datetime.fromtimestamp(moment, UTC))))
    tail = spec.tail or ((0.0,) if last % spec.every else ())
    timed += [(run.end + s, CheckinAt(end=True, offset_s=s)) for s in tail]
    return [c for _, c in sorted(timed, key=lambda item: item[0])]


def _first_at(moments: list[datetime], epoch: float) -> int | None:
    """The first check-in at or after `epoch`, compared at the microseconds a check-in time
    keeps (a crash line that is the recording's last record is seen by its `end` check-in)."""
    when = utc(epoch)
    return next((i for i, m in enumerate(moments, start=1) if m >= when), None)


_RANK = {Health.HEALTHY: 0, Health.DEGRADED: 1, Health.DOWN: 2}


def _level(spec: Spec, want: Want) -> Health:
    """The health a finding means once it is unambiguous."""
    if (want.severity or "warning") == "info" or (spec.contract and want.id in INFO_IDS):
        return Health.HEALTHY
    if want.health is not None:
        return want.health
    if spec.contract:
        return Health.DOWN if want.id in DOWN_IDS else Health.DEGRADED
    return spec.bad


def _health(spec: Spec, expects: list[tuple[Want, Expect, int]], moments: list[datetime], rec: Recording) -> list[HealthPhase]:
    """Per check-in: the worst health of the findings already unambiguous (Healthy if none),
    or also a worse one while its signal shows but is still ambiguous; Healthy again after a
    recovery. Consecutive check-ins that accept the same healths form one phase."""
    n = len(moments)
    graded = [(_level(spec, w), onset, e.by_checkin) for w, e, onset in expects]
    graded = [g for g in graded if g[0] != Health.HEALTHY]
    if not graded:
        return [HealthPhase(health=Health.HEALTHY)]
    back = n + 1
    if spec.recovers:
        first = _first_at(moments, rec.marks[spec.recovers])
        if first is None:
            raise ValueError(f"{spec.slug}: no check-in after {spec.recovers}")
        back = first
    phases: list[tuple[int, tuple[Health, ...]]] = []
    for i in range(1, n + 1):
        if i >= back:
            accepted: tuple[Health, ...] = (Health.HEALTHY,)
        else:
            now = max((h for h, _, due in graded if due <= i), key=_RANK.__getitem__, default=Health.HEALTHY)
            pending = {h for h, onset, due in graded if onset <= i < due and _RANK[h] > _RANK[now]}
            accepted = tuple(sorted({now} | pending, key=_RANK.__getitem__))
        if phases and phases[-1][1] == accepted:
            phases[-1] = (i, accepted)
        else:
            phases.append((i, accepted))
    return [
        HealthPhase(health=h[0] if len(h) == 1 else list(h), until_checkin=None if i == len(phases) - 1 else until)
        for i, (until, h) in enumerate(phases)
    ]


def build(spec: Spec, work: Path) -> tuple[Case, Path, str]:
    """Write the run of `spec` into `work/run`, apply its edits; return (case, run dir, manifest text)."""
    sc = scenario_of(spec)
    run_dir = write_run(sc, work / RUN)
    rec = Recording(run_dir, sc)
    for edit in spec.edits:
        edit(rec)
    manifest = build_manifest(run_dir, symlinks=rec.links, renames=rec.renames)
    recorded = RecordedRun(run_dir, manifest, ZoneInfo(sc.log_tz))
    checkins = _schedule(spec, rec, recorded)
    draft = Case(
        title=spec.title,
        layout=sc.layout,
        difficulty=spec.difficulty,  # type: ignore[arg-type]
        log_timezone=sc.log_tz,
        checkins=checkins,
        health=[HealthPhase(health=Health.HEALTHY)],
    )
    moments = schedule(draft, recorded, spec.slug)
    expects: list[tuple[Want, Expect, int]] = []
    for want in spec.expect:
        signal_step, unambiguous = want.settle(rec, recorded)
        due = _first_at(moments, unambiguous)
        if due is None:
            raise ValueError(f"{spec.slug}: {want.id} is unambiguous only after the last check-in")
        signal_seen = recorded.step_time(signal_step, None)
        onset = _first_at(moments, signal_seen if signal_seen is not None else unambiguous) or due
        expect = Expect(id=want.id, signal_step=signal_step, by_checkin=due, severity=want.severity, why=want.why)  # type: ignore[arg-type]
        expects.append((want, expect, min(onset, due)))
    allow, forbid = spec.allow, spec.forbid
    if spec.contract:
        if sorted(w.id for w in spec.expect) != sorted(sc.expects):
            raise ValueError(f"{spec.slug}: the row expects {[w.id for w in spec.expect]}, the scenario {sc.expects}")
        if sc.kind == "healthy":
            _normal_rates(spec.slug, rec)
        allow, forbid = sc.tolerates, sc.forbids
    description = spec.description
    if rec.edits:
        description += ("\n" if description else "") + "Edits: " + "; ".join(rec.edits) + "."
    case = draft.model_copy(
        update={
            "description": description,
            "expect": [e for _, e, _ in expects],
            "allow": list(allow),
            "forbid": [f for f in forbid if f not in {w.id for w in spec.expect}],
            "health": _health(spec, expects, moments, rec),
        }
    )
    return Case.model_validate(case.model_dump()), run_dir, manifest.dumps()


def make(spec: Spec, root: Path = FIXTURES) -> Path:
    with tempfile.TemporaryDirectory(prefix="rlagent-fixture-") as tmp:
        case, run_dir, manifest = build(spec, Path(tmp))
        target = root / spec.slug
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        shutil.copytree(run_dir, target / RUN, symlinks=True)
    (target / MANIFEST).write_text(manifest, encoding="utf-8")
    header = (
        f"Fixture {spec.slug}: made by evals/make_fixtures.py from scenario {spec.scenario!r}.\n"
        "Change the TABLE row there and re-make; by_checkin is computed from findings.md thresholds."
    )
    (target / CASE).write_text(render_case(case, header), encoding="utf-8")
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Make the simulated-run fixtures under evals/fixtures/.")
    parser.add_argument("slugs", nargs="*", help="fixtures to make (default: all)")
    parser.add_argument("--out", type=Path, default=FIXTURES, help="where to write them")
    parser.add_argument("--list", action="store_true", help="list the table and exit")
    args = parser.parse_args(argv)
    chosen = [s for s in TABLE if not args.slugs or s.slug in args.slugs or s.slug.split("_", 1)[1] in args.slugs]
    if args.list:
        for spec in TABLE:
            print(f"{spec.slug:40} {spec.difficulty:7} {', '.join(w.id for w in spec.expect) or '-'}")
        return 0
    unknown = set(args.slugs) - {s.slug for s in chosen} - {s.slug.split("_", 1)[1] for s in chosen}
    if unknown:
        print(f"unknown fixture(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    for spec in chosen:
        target = make(spec, args.out)
        size = sum(p.stat().st_size for p in (target / RUN).rglob("*") if p.is_file() and not p.is_symlink())
        print(f"{target.name:40} {size / 1e6:5.2f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
