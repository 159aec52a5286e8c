"""The SIMULATED verl, TRL and OpenRLHF fixtures (evals/fixtures/84_... and on): what make_framework_fixtures.py
makes, byte for byte; each a valid case.toml (the existing schema plus `framework`), a manifest that matches
run/, and a writes.json a replay can grow the files by; at least 8 per framework, 3 healthy ones among them.

Replaying them through the real check-in graph needs the collector to read these frameworks (issue 9's
adapters): a framework is listed in WIRED once it does, and its fixtures are then replayed like the
prime-rl ones (the must-pass tier gates CI)."""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from rlagent.evals.case import Difficulty
from rlagent.evals.fixture import CASE, FIXTURES, RUN, fixture_dirs
from rlagent.evals.make_framework_fixtures import FIRST, TABLE, expected_ids, load_framework_case, make, scenario_of
from rlagent.evals.manifest import MANIFEST, check_files, load_manifest
from rlagent.evals.simulator.frameworks.common import SIDE_CAR
from rlagent.evals.simulator.frameworks.registry import FRAMEWORK_SCENARIOS
from rlagent.evals.simulator.frameworks.scenario import EXPECTATIONS

WIRED: set[str] = {"verl", "trl", "openrlhf"}
"""Frameworks the collector reads (add one when its adapter lands: its fixtures are then replayed)."""


def _framework(path: Path) -> str:
    return str(tomllib.loads((path / CASE).read_text(encoding="utf-8")).get("framework", "prime-rl"))


FRAMEWORK_FIXTURES = [p for p in fixture_dirs() if _framework(p) != "prime-rl"]


def test_the_table_and_the_folders_agree():
    assert sorted(p.name for p in FRAMEWORK_FIXTURES) == sorted(spec.slug for spec in TABLE)
    assert [int(spec.slug.split("_")[0]) for spec in TABLE] == list(range(FIRST, FIRST + len(TABLE)))
    assert {spec.scenario for spec in TABLE} == set(FRAMEWORK_SCENARIOS), "a scenario without a fixture"


def test_every_framework_has_its_fixtures():
    cases = {p.name: load_framework_case(p / CASE) for p in FRAMEWORK_FIXTURES}
    per = Counter(c.framework for c in cases.values())
    assert min(per[f] for f in ("verl", "trl", "openrlhf")) >= 8, per
    healthy = Counter(c.framework for c in cases.values() if c.healthy)
    assert min(healthy[f] for f in ("verl", "trl", "openrlhf")) >= 3, healthy
    alarming = {scenario_of(spec).framework for spec in TABLE if scenario_of(spec).profile == "alarming"}
    assert alarming == {"verl", "trl", "openrlhf"}
    # each failure a framework can show has a fixture in it
    shown = {(scenario_of(spec).framework, scenario_of(spec).kind) for spec in TABLE}
    wanted = {(f, kind) for kind, e in EXPECTATIONS.items() for f in e.frameworks}
    assert sorted(wanted - shown) == []
    styles = {scenario_of(spec).style for spec in TABLE}
    assert {"v0.4", "v0.5-numpy1", "v0.7-numpy2", "tf4", "tf5", "v0.8.0", "v0.11"} <= styles


@pytest.mark.parametrize("path", FRAMEWORK_FIXTURES, ids=[p.name for p in FRAMEWORK_FIXTURES])
def test_fixture_is_complete_and_consistent(path):
    case = load_framework_case(path / CASE)
    spec = next(s for s in TABLE if s.slug == path.name)
    sc = scenario_of(spec)
    assert case.framework == sc.framework and case.layout is None
    assert case.title.startswith("SIMULATED ") and "SIMULATED" in case.description
    assert (path / CASE).read_text().startswith("# Fixture ") and "SIMULATED" in (path / CASE).read_text().splitlines()[0]
    expects, tolerates = expected_ids(sc)
    assert sorted(e.id for e in case.expect) == sorted(expects)
    assert set(case.allow) == set(tolerates) and not set(case.forbid) & (set(expects) | set(tolerates))
    assert case.difficulty in (Difficulty.EASY, Difficulty.MEDIUM, Difficulty.HARD)
    manifest = load_manifest(path / MANIFEST)
    assert check_files(path / RUN, manifest) == []
    writes = json.loads((path / SIDE_CAR).read_text())
    assert writes["simulated"] is True and writes["framework"] == sc.framework
    for rel, sizes in writes["appends"].items():
        file = path / RUN / rel
        assert file.stat().st_size == sizes[-1][0], rel  # the last recorded size is the file's
        assert manifest.files[rel].mtime.timestamp() == pytest.approx(sizes[-1][1], abs=1e-3)
    steps = {int(n): t for n, t in writes["steps"].items()}
    for checkin in case.checkins:
        if checkin.step is not None:
            assert checkin.step in steps, f"no line for step {checkin.step}"
    assert sum(f.stat().st_size for f in (path / RUN).rglob("*") if f.is_file()) <= 600_000


REMADE = ["verl-healthy", "verl-actor-died", "trl-healthy-tf5", "trl-crash-oom", "openrlhf-healthy-v080", "openrlhf-engine-dead"]


@pytest.mark.parametrize("slug", [next(s.slug for s in TABLE if s.scenario == name) for name in REMADE])
def test_fixtures_are_what_make_framework_fixtures_makes(slug, tmp_path):
    """Re-made fixtures are byte-identical to the committed ones (stale after a simulator change: re-make with
    `python -m rlagent.evals.make_framework_fixtures`)."""
    spec = next(s for s in TABLE if s.slug == slug)
    made = make(spec, tmp_path)
    again = make(spec, tmp_path / "again")
    committed = FIXTURES / slug
    files = sorted(p.relative_to(made).as_posix() for p in made.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(committed).as_posix() for p in committed.rglob("*") if p.is_file())
    for rel in files:
        assert (made / rel).read_bytes() == (committed / rel).read_bytes(), rel
        assert (again / rel).read_bytes() == (made / rel).read_bytes(), rel


@pytest.mark.parametrize("path", FRAMEWORK_FIXTURES, ids=[p.name for p in FRAMEWORK_FIXTURES])
def test_replayed_like_the_prime_rl_fixtures(path):
    case = load_framework_case(path / CASE)
    if case.framework not in WIRED:
        pytest.skip(f"the collector does not read {case.framework} runs yet (issue 9's adapters)")
    if not case.must_pass:
        pytest.skip("not in the must-pass tier")
    from rlagent.evals.fixture import load_fixture
    from rlagent.evals.replay import replay
    from rlagent.evals.scoring import explain, score_fixture

    result = replay(load_fixture(path))
    score = score_fixture(result)
    assert score.passed, "diagnosis differs from case.toml:\n" + "\n".join(explain(result, score))
