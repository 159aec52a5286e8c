"""case.toml and fixture loading: a mistake in a hand-written case is one clear message naming
the key; a broken fixture is reported by name with every problem, never a traceback."""

from __future__ import annotations

import os
import shutil

import pytest

from rlagent.evals.case import CaseError, parse_case
from rlagent.evals.casewriter import render_case
from rlagent.evals.fixture import FIXTURES, FixtureError, load_fixture
from rlagent.models.run import Health

GOOD = """
title = "entropy collapse"
layout = "H"
difficulty = "easy"
checkins = [{ step = 10 }, { step = 20 }, { at = 2026-08-24T15:00:00Z }, { end = true, offset_s = 600.0 }]

[[expect]]
id = "entropy_collapse"
signal_step = 15
by_checkin = 3

[[health]]
health = "Healthy"
until_checkin = 1

[[health]]
health = ["Healthy", "Degraded"]
until_checkin = 2

[[health]]
health = "Degraded"
"""


def error_of(text: str) -> str:
    with pytest.raises(CaseError) as info:
        parse_case(text)
    return str(info.value)


def test_a_good_case_parses_and_answers_questions():
    case = parse_case(GOOD)
    assert [c.describe() for c in case.checkins] == ["step 10", "step 20", "2026-08-24T15:00:00+00:00", "end +600s"]
    assert case.health_at(1) == (Health.HEALTHY,) and case.health_at(2) == (Health.HEALTHY, Health.DEGRADED)
    assert case.health_at(4) == (Health.DEGRADED,)
    assert case.must_pass and not case.healthy and case.expected("entropy_collapse").by_checkin == 3


def test_render_case_round_trips():
    case = parse_case(GOOD)
    assert parse_case(render_case(case, "made by a test")) == case


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ('id = "entropy_collapse"', 'id = "entropy_colapse"'),
            "expect.0.id: unknown finding id 'entropy_colapse' (did you mean 'entropy_collapse'?)",
        ),
        (("by_checkin = 3", "by_checkin = 7"), "by_checkin = 7 but there are only 4 check-ins"),
        (('difficulty = "easy"', 'difficulty = "trivial"'), "difficulty: Input should be 'easy', 'medium' or 'hard'"),
        (("{ step = 20 }", "{ step = 20, end = true }"), "checkins.1: give exactly one of at, step, end = true (got step, end)"),
        (("until_checkin = 2", "until_checkin = 1"), "health[1]: until_checkin = 1 does not come after the previous phase (1)"),
        (
            ('title = "entropy collapse"', 'title = "x"\nlog_timezone = "Mars/Olympus"'),
            "log_timezone: unknown time zone 'Mars/Olympus'",
        ),
        (('layout = "H"', 'layout = "H"\ncolour = "red"'), "colour: unknown key"),
        (('title = "entropy collapse"\n', ""), "title: required key missing"),
        (("checkins = [", "checkins = [[["), "malformed TOML"),
    ],
)
def test_validation_errors_name_the_key_and_say_what_is_wrong(change, message):
    old, new = change
    assert old in GOOD
    assert message in error_of(GOOD.replace(old, new, 1))


def test_health_phases_must_cover_every_checkin():
    text = GOOD.replace('[[health]]\nhealth = "Degraded"\n', '[[health]]\nhealth = "Degraded"\nuntil_checkin = 3\n')
    assert "health phases cover check-ins 1..3, not all 4" in error_of(text)


def test_an_expected_id_cannot_also_be_forbidden():
    assert "entropy_collapse is both expected and forbidden" in error_of('forbid = ["entropy_collapse"]\n' + GOOD)


@pytest.fixture
def broken(tmp_path):
    """A copy of a small bundled fixture to break."""
    target = tmp_path / "99_broken"
    shutil.copytree(FIXTURES / "20_crash-oom-l", target, symlinks=True)
    return target


def test_a_fixture_with_every_problem_lists_them_all_by_name(broken):
    (broken / "case.toml").write_text(GOOD.replace('id = "entropy_collapse"', 'id = "nope"'))
    (broken / "run" / "logs" / "trainer.log").unlink()
    (broken / "run" / "stray.txt").write_text("?")
    with pytest.raises(FixtureError) as info:
        load_fixture(broken)
    problems = info.value.problems
    assert info.value.name == "99_broken"
    assert any("unknown finding id 'nope'" in p for p in problems)
    assert "run/logs/trainer.log is in the manifest but missing" in problems
    assert "run/stray.txt is not in the manifest (its time is unknown)" in problems


def test_a_manifest_file_that_is_there_as_a_fifo_is_named_as_one(broken):
    """Refused as before, but said to be "missing" though it was there."""
    (broken / "run" / "logs" / "trainer.log").unlink()
    os.mkfifo(broken / "run" / "logs" / "trainer.log")
    (broken / "run" / "logs" / "orchestrator.log").unlink()
    (broken / "run" / "logs" / "orchestrator.log").symlink_to("trainer.log")
    with pytest.raises(FixtureError) as info:
        load_fixture(broken)
    problems = info.value.problems
    assert "run/logs/trainer.log is in the manifest but is a FIFO, not a regular file" in problems
    assert "run/logs/orchestrator.log is in the manifest but is a symlink, not a file" in problems


def test_missing_manifest_and_wrong_layout_are_reported(broken):
    (broken / "manifest.json").unlink()
    (broken / "case.toml").write_text((broken / "case.toml").read_text().replace('layout = "L"', 'layout = "H"'))
    with pytest.raises(FixtureError) as info:
        load_fixture(broken)
    text = str(info.value)
    assert text.startswith("99_broken: ") and "manifest.json: missing" in text
    assert "case.toml says layout H but run/ is laid out as L" in text


def test_a_malformed_manifest_is_a_clear_problem(broken):
    (broken / "manifest.json").write_text('{"version": 1, "files": {"x": {"kind": "blob", "mtime": "2026-01-01T00:00:00Z"}}}')
    with pytest.raises(FixtureError) as info:
        load_fixture(broken)
    assert "manifest.json: files.x.kind:" in str(info.value)
