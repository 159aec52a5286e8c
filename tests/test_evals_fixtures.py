"""Regression tests of diagnoses: every must-pass fixture (easy, medium) replayed through the real
check-in graph must say what its case.toml expects, check-in by check-in; the eval's own figures
must meet their goals; the fixtures must be what make_fixtures.py makes; the commands must work.

A changed diagnosis fails with a per-check-in diff naming the fixture, the check-in and the
finding. Fixtures the rules are known to get wrong are listed in KNOWN_RULE_MISSES with the
numbers: they are strict xfails, so fixing the rule turns them into a failure that asks for the
entry to be removed (the fixture's expectation is never loosened instead).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rlagent.evals.case import CaseError, Difficulty, load_case
from rlagent.evals.fixture import CASE, FIXTURES, FixtureError, fixture_dirs, load_fixture
from rlagent.evals.make_fixtures import TABLE, make, scenario_of
from rlagent.evals.replay import ReplayResult, replay
from rlagent.evals.scoring import explain, score_fixture, scoreboard
from rlagent.evals.simulator import SCENARIOS
from rlagent.evals.simulator.expectations import EXPECTATIONS

RLAGENT = [sys.executable, "-m", "rlagent"]
KNOWN_RULE_MISSES: dict[str, str] = {}


def _tier(path: Path) -> str:
    try:
        return load_case(path / CASE).difficulty.value
    except CaseError:
        return "broken"  # still collected: its test reports what is wrong


def _framework(path: Path) -> str:
    """The `framework` a case.toml names: the SIMULATED verl/TRL/OpenRLHF fixtures (84 and on) are checked by
    tests/test_simulator_frameworks_fixtures.py until the collector reads those frameworks."""
    try:
        return str(tomllib.loads((path / CASE).read_text(encoding="utf-8")).get("framework", "prime-rl"))
    except (OSError, tomllib.TOMLDecodeError):
        return "prime-rl"


ALL = [p for p in fixture_dirs() if _framework(p) == "prime-rl"]
MUST_PASS = [p for p in ALL if _tier(p) in (Difficulty.EASY, Difficulty.MEDIUM, "broken")]


@pytest.fixture(scope="session")
def replays():
    """Each fixture is replayed once per session, shared by the per-fixture and the figure tests."""
    cache: dict[str, ReplayResult | FixtureError] = {}

    def get(path: Path) -> ReplayResult:
        if path.name not in cache:
            try:
                cache[path.name] = replay(load_fixture(path))
            except FixtureError as exc:
                cache[path.name] = exc
        result = cache[path.name]
        if isinstance(result, FixtureError):
            pytest.fail(str(result), pytrace=False)
        return result

    return get


def _param(path: Path):
    miss = KNOWN_RULE_MISSES.get(path.name)
    marks = [pytest.mark.xfail(reason=f"known rule miss: {miss}", strict=True)] if miss else []
    return pytest.param(path, id=path.name, marks=marks)


@pytest.mark.parametrize("path", [_param(p) for p in MUST_PASS])
def test_diagnosis_matches_case(path, replays):
    result = replays(path)
    score = score_fixture(result)
    assert score.passed, "diagnosis differs from case.toml:\n" + "\n".join(explain(result, score))


def test_the_must_pass_tier_meets_the_goals(replays):
    board = scoreboard(score_fixture(replays(p)) for p in MUST_PASS)
    clean = scoreboard(f for f in board.fixtures if f.fixture not in KNOWN_RULE_MISSES)
    assert board.recall is not None and board.recall >= 0.95, board.summary()["by_id"]
    assert board.ungated == 0
    assert [(a.fixture, a.checkin, a.id) for a in clean.false_alarms] == []
    assert board.health_accuracy is not None and board.health_accuracy >= 0.95
    assert sorted(f.fixture for f in board.fixtures if not f.passed) == sorted(KNOWN_RULE_MISSES)


def test_the_fixture_set_covers_what_it_must():
    cases = {p.name: load_fixture(p).case for p in ALL}
    assert len(cases) >= 30
    assert {c.layout.value for c in cases.values()} == {"H", "L"}
    assert sum(c.healthy for c in cases.values()) >= 8
    scenarios = {spec.scenario for spec in TABLE}
    assert {
        "healthy-h",
        "healthy-l",
        "healthy-multienv-h",
        "finished-h",
        "entropy-collapse-h",
        "nan-h",
        "crash-oom-h",
        "truncation-l",
    } <= scenarios
    assert sorted(cases) == sorted(spec.slug for spec in TABLE), "a fixture folder without a TABLE row, or the reverse"
    assert sorted(set(SCENARIOS) - scenarios) == [], "a simulator scenario without a fixture"
    shown = {(sc.kind, sc.layout) for sc in map(scenario_of, TABLE)}
    wanted = {(kind, layout) for kind, e in EXPECTATIONS.items() for layout in e.layouts}
    assert sorted(wanted - shown) == [], "a failure kind without a fixture in a layout whose files show it"


@pytest.mark.parametrize("path", ALL, ids=[p.name for p in ALL])
def test_fixtures_stay_small(path):
    size = sum(f.stat().st_size for f in (path / "run").rglob("*") if f.is_file() and not f.is_symlink())
    assert size <= 1_200_000, f"{path.name}: {size / 1e6:.2f} MB"


@pytest.mark.parametrize(
    "slug", ["10_healthy-l-rotated-junk", "21_crash-oom-h-resumed", "55_host-oom-h", "57_inference-unreachable-l"]
)
def test_fixtures_are_what_make_fixtures_makes(slug, tmp_path):
    """Re-made fixtures are byte-identical to the committed ones (stale after a simulator change:
    re-make with `python -m rlagent.evals.make_fixtures`)."""
    spec = next(s for s in TABLE if s.slug == slug)
    made = make(spec, tmp_path)
    committed = FIXTURES / slug
    files = sorted(p.relative_to(made).as_posix() for p in made.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(committed).as_posix() for p in committed.rglob("*") if p.is_file())
    for rel in files:
        assert (made / rel).read_bytes() == (committed / rel).read_bytes(), rel


# --- the commands -------------------------------------------------------------------------------


def rlagent(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*RLAGENT, *args], capture_output=True, text=True, timeout=timeout)


def test_replay_prints_each_checkin_and_the_status_file():
    done = rlagent("replay", "crash-oom-l", "--status")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("20_crash-oom-l: CUDA OOM kills the trainer at step 23, layout L (easy)")
    assert any(line.startswith("#5 ") and "Down" in line for line in lines)
    assert any("run_crashed (critical): run crashed" in line for line in lines)
    assert "as expected (6 check-ins" in done.stdout
    assert done.stdout.count("**Health**: ") == 6 and "<!-- rlagent:checkin" in done.stdout


def test_eval_json_scores_the_given_fixtures_and_reports_broken_ones(tmp_path):
    root = tmp_path / "fixtures"
    root.mkdir()
    for name in ("02_healthy-l", "20_crash-oom-l"):
        shutil.copytree(FIXTURES / name, root / name, symlinks=True)
    broken = root / "99_broken"
    shutil.copytree(FIXTURES / "02_healthy-l", broken, symlinks=True)
    (broken / "manifest.json").unlink()
    done = rlagent("eval", "--root", str(root), "--json")
    assert done.returncode == 0, done.stderr
    board = json.loads(done.stdout)
    assert board["fixtures"] == 2 and board["passed"] == 2 and board["ungated_actions"] == 0
    assert board["recall"] == 1.0 and board["false_alarms_on_healthy"] == 0
    assert board["by_id"]["run_crashed"]["recall"] == 1.0
    assert list(board["errors"]) == ["99_broken"] and "manifest.json: missing" in board["errors"]["99_broken"][0]
    strict = rlagent("eval", "--root", str(root), "--strict", "--tag", "easy")
    assert strict.returncode == 1 and "cannot replay 99_broken" in strict.stdout
    assert "2/2 fixtures as expected" in strict.stdout
    only_broken = rlagent("eval", str(broken))  # nothing replayed: it exited 0, a failure as a success
    assert only_broken.returncode == 1 and "cannot replay 99_broken" in only_broken.stdout


def test_a_fixture_file_that_is_a_fifo_or_a_device_is_refused_not_waited_on(tmp_path):
    """A FIFO as case.toml or manifest.json waited for a writer for ever; /dev/zero was read until
    memory ran out (a fixture may be anyone's recorded run)."""
    fixture = tmp_path / "02_healthy-l"
    shutil.copytree(FIXTURES / fixture.name, fixture, symlinks=True)
    for name, replace, why in [
        ("case.toml", lambda p: os.mkfifo(p), "case.toml: unreadable (a FIFO, not read)"),
        ("manifest.json", lambda p: p.symlink_to("/dev/zero"), "manifest.json: unreadable (a character device, not read)"),
    ]:
        original = (fixture / name).read_bytes()
        (fixture / name).unlink()
        replace(fixture / name)
        done = rlagent("replay", str(fixture), timeout=30)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and why in done.stderr, done.stderr
        (fixture / name).unlink()
        (fixture / name).write_bytes(original)
    assert rlagent("replay", str(fixture)).returncode == 0


def test_checkout_mtimes_do_not_matter(replays, tmp_path):
    """Git gives every file the checkout time: the replay dates lines from manifest.json only."""
    copy = tmp_path / "20_crash-oom-l"
    shutil.copytree(FIXTURES / copy.name, copy, symlinks=True)
    for path in copy.rglob("*"):
        if path.is_file() and not path.is_symlink():
            os.utime(path, (1_900_000_000, 1_900_000_000))

    def seen(result: ReplayResult) -> list[tuple]:
        # The entry's id comment names the working copy's (temporary) path: left out.
        return [(c.at, c.step, c.health, sorted(c.ids), c.status_entry.rsplit("<!--", 1)[0]) for c in result.checkins]

    assert seen(replay(load_fixture(copy))) == seen(replays(FIXTURES / copy.name))
