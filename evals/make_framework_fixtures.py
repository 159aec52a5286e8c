"""Make the SIMULATED verl, TRL and OpenRLHF fixtures under evals/fixtures/ (numbered from 84), table-driven.

    python -m rlagent.evals.make_framework_fixtures                       # re-make all
    python -m rlagent.evals.make_framework_fixtures 84_verl-healthy trl-nan
    python -m rlagent.evals.make_framework_fixtures --list

Each row of `TABLE` is one fixture: a scenario of the framework simulator (evals/simulator/frameworks), its
variant, and whether the run is relaunched with the framework's resume flag after its crash. A fixture
folder holds `run/` (the launch directory as the run left it), `manifest.json` (every file's mtime),
`case.toml` (the existing schema, plus `framework = "verl"|"trl"|"openrlhf"` and no prime-rl `layout`) and
`writes.json`: these frameworks' console logs carry no time on most lines, so a replay grows each file by
the sizes recorded there (`appends`: [size after the write, epoch]; `puts`: earlier contents of small files
rewritten in place; `removed`; `steps`: when each step's metrics line was written; `attempts`).

What a case expects is never read off the rules: each finding's signal step and the moment it becomes
unambiguous are computed (framework_moments.py) from the simulator's own numbers (`FrameworkNumbers`) with findings.md's
thresholds (`Thresholds()` defaults), on the rows the framework logs; crash ids from the moment the crash
text is written. Every detector also runs on every fixture: one that fires on a row that neither expects
nor tolerates it is an error (a healthy fixture must stay on the healthy side of every threshold).
Check-ins: every 10 logged steps, 2 minutes after a crash the run is resumed from, then the end of the
recording (and 10 minutes later after a crash).
Health: Healthy before the signal, either answer while it is ambiguous, then the failure's health (Down
for a crash), Healthy again after a resume the run came back from. Output is deterministic: re-making
gives the same bytes (a test compares).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import rlagent.evals.case as case_module
from rlagent.evals.case import Case, CheckinAt, Expect, HealthPhase, load_case
from rlagent.evals.casewriter import render_case
from rlagent.evals.fixture import CASE, FIXTURES, RUN
from rlagent.evals.framework_moments import Recorded, Row, expected_ids, moments
from rlagent.evals.manifest import MANIFEST, build_manifest
from rlagent.evals.simulator.frameworks.common import SIDE_CAR, Growth, Plan
from rlagent.evals.simulator.frameworks.numbers import FrameworkNumbers
from rlagent.evals.simulator.frameworks.registry import FRAMEWORK_SCENARIOS
from rlagent.evals.simulator.frameworks.scenario import ALL_IDS, DOWN_IDS, INFO_IDS, NEW_IDS, FrameworkScenario
from rlagent.evals.simulator.frameworks.writer import next_attempt, resume_point, write_framework_run
from rlagent.models.run import Health, Layout

FIRST = 84
"""Fixture numbers continue after the prime-rl fixtures (01-83)."""


@dataclass(frozen=True)
class Spec:
    slug: str
    scenario: str
    difficulty: str = "easy"
    changes: dict = field(default_factory=dict)
    resume: bool = False
    """Relaunch after the crash with the framework's resume flag, until `resume_steps`."""
    resume_steps: int = 40


def _specs() -> list[Spec]:
    rows: list[tuple[str, str, dict, bool]] = [
        # name, difficulty, changes, resumed
        ("verl-healthy", "easy", {}, False),
        ("verl-healthy-v04", "easy", {}, False),
        ("verl-alarming-normal", "medium", {}, False),
        ("verl-entropy-collapse", "easy", {}, False),
        ("verl-clip-ratio-high", "easy", {}, False),
        ("verl-nan", "easy", {}, False),
        ("verl-kl-blowup", "easy", {}, False),
        ("verl-reward-constant", "easy", {}, False),
        ("verl-degenerate-output", "medium", {}, False),
        ("verl-reward-hacking", "medium", {}, False),
        ("verl-crash-oom", "easy", {}, False),
        ("verl-actor-died", "easy", {}, True),
        ("verl-hydra-error", "easy", {}, False),
        ("verl-engine-dead", "easy", {}, False),
        ("verl-reward-fn-error", "easy", {}, False),
        ("verl-host-oom", "medium", {}, False),
        ("trl-healthy", "easy", {}, False),
        ("trl-healthy-tf5", "easy", {}, False),
        ("trl-alarming-normal", "medium", {}, False),
        ("trl-entropy-collapse", "easy", {}, False),
        ("trl-truncation", "easy", {}, False),
        ("trl-nan", "easy", {}, False),
        ("trl-zero-std", "easy", {}, False),
        ("trl-reward-constant", "easy", {}, False),
        ("trl-kl-blowup", "easy", {}, False),
        ("trl-format-collapse", "medium", {}, False),
        ("trl-reward-hacking", "medium", {}, False),
        ("trl-degenerate-output", "medium", {}, False),
        ("trl-crash-oom", "easy", {}, True),
        ("trl-nccl-timeout", "easy", {}, False),
        ("trl-host-oom", "easy", {}, False),
        ("trl-reward-fn-error", "easy", {}, False),
        ("openrlhf-healthy", "easy", {}, False),
        ("openrlhf-healthy-v080", "easy", {}, False),
        ("openrlhf-alarming-normal", "medium", {}, False),
        ("openrlhf-entropy-collapse", "easy", {}, False),
        ("openrlhf-truncation", "easy", {}, False),
        ("openrlhf-nan", "easy", {}, False),
        ("openrlhf-kl-blowup", "easy", {}, False),
        ("openrlhf-reward-constant", "easy", {}, False),
        ("openrlhf-crash-oom", "easy", {}, True),
        ("openrlhf-deepspeed-error", "easy", {}, False),
        ("openrlhf-engine-dead", "easy", {}, False),
        ("openrlhf-actor-died", "easy", {}, False),
    ]
    out = []
    for i, (name, difficulty, changes, resumed) in enumerate(rows):
        slug = f"{FIRST + i:02d}_{name}" + ("-resumed" if resumed else "")
        out.append(Spec(slug, name, difficulty, changes, resumed))
    return out


TABLE: tuple[Spec, ...] = tuple(_specs())

SMALL = {"samples_kept": 3}
"""Sample files (rollout dumps, completions) of the last 3 steps only: a fixture stays a few hundred KB."""


def scenario_of(spec: Spec) -> FrameworkScenario:
    base = FRAMEWORK_SCENARIOS[spec.scenario]
    return base.variant(**{**SMALL, **spec.changes})


@contextlib.contextmanager
def new_ids_known() -> Iterator[None]:
    """Validate cases with findings.md's five new ids even while the rules' catalogue lacks them."""
    saved = case_module.FINDING_IDS
    case_module.FINDING_IDS = frozenset(saved | set(NEW_IDS))
    try:
        yield
    finally:
        case_module.FINDING_IDS = saved


def load_framework_case(path: Path) -> Case:
    with new_ids_known():
        return load_case(path)


# --- what the framework logs, from the simulator's numbers ---------------------------------------


def _rows(sc: FrameworkScenario, plan: Plan, growth: Growth, seen: set[int]) -> list[Row]:
    nums = FrameworkNumbers(sc)
    out = []
    prev = sc.first_step - 1
    for n in sorted(plan.step_times):
        window = tuple(nums.at(k) for k in range(prev + 1, n + 1))
        prev = n
        if n in seen:
            continue
        seen.add(n)
        out.append(Row(n, growth.steps[str(n)], nums.at(n), window))
    return out


def record(spec: Spec, work: Path) -> Recorded:
    sc = scenario_of(spec)
    growth = Growth()
    run_dir = work / RUN
    _, plan = write_framework_run(sc, run_dir, growth=growth)
    steps_seen: set[int] = set()
    first_steps = dict(growth.steps)
    rows = _rows(sc, plan, growth, steps_seen)
    scenarios, plans = [sc], [plan]
    marks: dict[str, float] = {}
    if spec.resume:
        step = resume_point(run_dir, sc)
        if step is None:
            raise ValueError(f"{spec.slug}: no checkpoint to resume from")
        nxt = next_attempt(sc, run_dir, step, gap_s=240.0, steps=spec.resume_steps)
        marks["crash"] = growth.attempts[-1]["end"]
        _, plan2 = write_framework_run(nxt, run_dir, growth=growth)
        growth.steps.update(first_steps)  # a step logged again after the resume keeps its first time
        rows += _rows(nxt, plan2, growth, steps_seen)
        scenarios.append(nxt)
        plans.append(plan2)
        first_new = min(t for n, t in growth.steps.items() if int(n) > step and str(n) not in first_steps)
        marks["recovered"] = first_new
    end = max([w for sizes in growth.appends.values() for _, w in sizes] + [p[0] for h in growth.puts.values() for p in h])
    end = max(end, *(p.stat().st_mtime for p in run_dir.rglob("*") if p.is_file()))
    return Recorded(scenarios, plans, growth, rows, round(end, 3), marks, run_dir)


# --- the case ---------------------------------------------------------------------------------------


def _schedule(rec: Recorded) -> list[tuple[float, CheckinAt]]:
    every = 10
    timed: list[tuple[float, CheckinAt]] = []
    for row in rec.rows:
        if row.step % every == 0:
            timed.append((row.time + 1.0, CheckinAt(step=row.step)))
    if "crash" in rec.marks:
        moment = round(rec.marks["crash"] + 120)
        timed.append((moment, CheckinAt(at=datetime.fromtimestamp(moment, UTC))))
    last_checkin = max((t for t, _ in timed), default=-math.inf)
    tail = (0.0, 600.0) if rec.plans[-1].exit_code == 1 else ((0.0,) if rec.end > last_checkin else ())
    timed += [(rec.end + s, CheckinAt(end=True, offset_s=s)) for s in tail]
    return sorted(timed, key=lambda item: item[0])


_RANK = {Health.HEALTHY: 0, Health.DEGRADED: 1, Health.DOWN: 2}


def _level(finding: str) -> Health:
    if finding in INFO_IDS:
        return Health.HEALTHY
    return Health.DOWN if finding in DOWN_IDS else Health.DEGRADED


def _health(graded: list[tuple[Health, int, int]], n: int, back: int) -> list[HealthPhase]:
    graded = [g for g in graded if g[0] != Health.HEALTHY]
    if not graded:
        return [HealthPhase(health=Health.HEALTHY)]
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


def _why(sc: FrameworkScenario, finding: str) -> str:
    framework = {"verl": "verl", "trl": "TRL", "openrlhf": "OpenRLHF"}[sc.framework]
    return {
        "run_crashed": f"{framework}'s crash output ({sc.kind}) and the launch command's exit",
        "cuda_oom": "torch.OutOfMemoryError: CUDA out of memory",
        "host_oom": "the host's OOM kill (Ray's memory monitor, or SIGKILL exitcode -9)",
        "nccl_error": "NCCL's watchdog: collective operation timeout, SIGABRT",
        "inference_crashed": "vLLM EngineDeadError inside RayTaskError",
        "reward_fn_error": "an exception raised in the reward function's frame",
        "entropy_collapse": "entropy below 10 % of its early value, sustained",
        "truncation_high": "the clip/truncation ratio above 50 %, sustained",
        "nan_detected": "nan in the loss and grad norm",
        "kl_blowup": "reference KL above 10, sustained",
        "reward_constant": "every completion scores the same (spread 0), 10 steps",
        "zero_advantage": "frac_reward_zero_std above 75 %, sustained",
        "format_collapse": "the format reward below half its peak, sustained",
        "reward_hacking": "a proxy reward rises while correctness (or validation accuracy) falls and completions shrink",
        "degenerate_output": "more than 20 % of the saved completions are `!!!!` to the cap",
        "run_finished": "the framework's end-of-training output",
    }.get(finding, finding)


def build(spec: Spec, work: Path) -> tuple[Case, Path, str, str]:
    """Write the run of `spec` into `work/run`; return (case, run dir, manifest text, writes.json text)."""
    with new_ids_known():
        return _build(spec, work)


def _build(spec: Spec, work: Path) -> tuple[Case, Path, str, str]:
    rec = record(spec, work)
    found = moments(rec)
    sc = rec.scenarios[0]
    expects, tolerates = expected_ids(sc)
    missing = [i for i in expects if i not in found]
    if missing:
        raise ValueError(f"{spec.slug}: the simulator's numbers never show {missing} by findings.md's thresholds")
    stray = sorted(set(found) - set(expects) - set(tolerates))
    if stray:
        raise ValueError(
            f"{spec.slug}: {stray} fire(s) on the simulator's numbers but the scenario neither expects nor tolerates it"
        )
    timed = _schedule(rec)
    checkins = [c for _, c in timed]
    when = [t for t, _ in timed]

    def first_at(epoch: float) -> int | None:
        return next((i for i, m in enumerate(when, start=1) if m >= epoch - 1e-6), None)

    expect: list[Expect] = []
    graded: list[tuple[Health, int, int]] = []
    for finding in expects:
        step, unambiguous = found[finding]
        due = first_at(unambiguous)
        if due is None:
            raise ValueError(f"{spec.slug}: {finding} is unambiguous only after the last check-in")
        signal_at = rec.growth.steps.get(str(step))
        onset = first_at(signal_at) if signal_at is not None else due
        severity = "critical" if finding == "run_crashed" else None
        expect.append(Expect(id=finding, signal_step=step, by_checkin=due, severity=severity, why=_why(sc, finding)))  # type: ignore[arg-type]
        graded.append((_level(finding), min(onset or due, due), due))
    back = len(checkins) + 1
    if "recovered" in rec.marks:
        back = first_at(rec.marks["recovered"]) or back
    health = _health(graded, len(checkins), back)
    forbid = [i for i in ALL_IDS if i not in set(expects) | set(tolerates)]
    title = f"SIMULATED {_label(sc)}: {sc.description}" + (" (then resumed)" if spec.resume else "")
    description = (
        f"SIMULATED {sc.framework} run (scenario {sc.name!r}, seed {sc.seed}) written by evals/simulator/frameworks; "
        f"the replay grows its files by writes.json. Samples of the last {sc.samples_kept} steps are kept."
    )
    if spec.resume:
        nxt = rec.scenarios[-1]
        description += f" Relaunched with the framework's resume flag from checkpoint step {nxt.resume_step}."
    case = Case(
        title=title,
        framework=sc.framework,
        difficulty=spec.difficulty,  # type: ignore[arg-type]
        description=description,
        log_timezone="UTC",
        checkins=checkins,
        expect=expect,
        allow=tolerates,
        forbid=forbid,
        health=health,
    )
    manifest = build_manifest(work / RUN)
    return case, work / RUN, manifest.dumps(), rec.growth.dumps(sc.framework)


def _label(sc: FrameworkScenario) -> str:
    return {
        "v0.4": "verl 0.4",
        "v0.5-numpy1": "verl 0.5",
        "v0.7-numpy2": "verl 0.7",
        "tf4": "TRL (transformers 4.x)",
        "tf5": "TRL (transformers 5.x)",
        "v0.8.0": "OpenRLHF 0.8.0",
        "v0.11": "OpenRLHF 0.11",
    }[sc.style]


def render(case: Case, header: str) -> str:
    """case.toml text: casewriter's layout, with `framework = ...` where prime-rl cases have `layout`."""
    text = render_case(case.model_copy(update={"layout": Layout.H}), header)
    text = text.replace('\nlayout = "H"\n', f'\nframework = "{case.framework}"\n', 1)
    return text


def make(spec: Spec, root: Path = FIXTURES) -> Path:
    with tempfile.TemporaryDirectory(prefix="rlagent-fwfixture-") as tmp:
        case, run_dir, manifest, writes = build(spec, Path(tmp))
        target = root / spec.slug
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        shutil.copytree(run_dir, target / RUN, symlinks=True)
    (target / MANIFEST).write_text(manifest, encoding="utf-8")
    (target / SIDE_CAR).write_text(writes, encoding="utf-8")
    header = (
        f"Fixture {spec.slug}: SIMULATED, made by evals/make_framework_fixtures.py from scenario {spec.scenario!r}.\n"
        "Change the TABLE row there and re-make; by_checkin is computed from findings.md thresholds."
    )
    text = render(case, header)
    with new_ids_known():
        if case_module.parse_case(text) != case:
            raise ValueError(f"{spec.slug}: case.toml does not read back as the case")
    (target / CASE).write_text(text, encoding="utf-8")
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Make the SIMULATED verl/TRL/OpenRLHF fixtures under evals/fixtures/.")
    parser.add_argument("slugs", nargs="*", help="fixtures to make (default: all)")
    parser.add_argument("--out", type=Path, default=FIXTURES, help="where to write them")
    parser.add_argument("--list", action="store_true", help="list the table and exit")
    args = parser.parse_args(argv)
    chosen = [s for s in TABLE if not args.slugs or s.slug in args.slugs or s.slug.split("_", 1)[1] in args.slugs]
    if args.list:
        for spec in TABLE:
            sc = scenario_of(spec)
            expects, _ = expected_ids(sc)
            print(f"{spec.slug:42} {sc.framework:9} {spec.difficulty:7} {', '.join(expects) or '-'}")
        return 0
    unknown = set(args.slugs) - {s.slug for s in chosen} - {s.slug.split("_", 1)[1] for s in chosen}
    if unknown:
        print(f"unknown fixture(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    for spec in chosen:
        target = make(spec, args.out)
        size = sum(p.stat().st_size for p in (target / RUN).rglob("*") if p.is_file() and not p.is_symlink())
        print(f"{target.name:42} {size / 1e6:5.2f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
