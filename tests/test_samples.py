"""A prime-rl run's saved rollouts reach the sample statistics that `degenerate_output` reads, as
verl's and TRL's do; a rollout that failed before the model wrote anything is not an empty answer.

The runs are the SIMULATED fixtures (evals/fixtures/): after a NaN the simulator writes `!!!!` to the
length cap in the saved samples (evals/simulator/rollouts.py), findings.md's own example of
degenerate output.
"""

from __future__ import annotations

import shutil

import pytest

from rlagent.agents.collector import sample_stats
from rlagent.evals.fixture import FIXTURES
from rlagent.graph.runner import Monitor
from rlagent.models.observation import Rollout
from rlagent.tools.adapters import discover


def _check_in(fixture: str, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / fixture / "run", run, symlinks=True, copy_function=shutil.copy2)
    monitor = Monitor(discover(run), home=tmp_path / "home", offline=True)
    try:
        return monitor.check_in()
    finally:
        monitor.close()


@pytest.mark.parametrize(("fixture", "step"), [("16_nan-h", 40), ("17_nan-l", 40)])
def test_a_nan_run_s_saved_samples_are_called_degenerate(fixture, step, tmp_path):
    state = _check_in(fixture, tmp_path)
    stats = state.out.observation.sample_stats
    assert stats["total"] >= 4 and stats["degenerate"] / stats["total"] > 0.2
    degenerate = [f for f in state.out.findings if f.id == "degenerate_output"]
    assert len(degenerate) == 1 and f"step {step}" in degenerate[0].summary


@pytest.mark.parametrize("fixture", ["01_healthy-h", "02_healthy-l"])
def test_a_healthy_run_s_samples_are_counted_and_not_degenerate(fixture, tmp_path):
    state = _check_in(fixture, tmp_path)
    stats = state.out.observation.sample_stats
    assert stats["total"] >= 4 and stats["degenerate"] == 0
    assert "degenerate_output" not in {f.id for f in state.out.findings}


def _rollout(completion: str, error: str | None = None) -> Rollout:
    return Rollout(why="", step=7, reward=0.0, completion=completion, error=error)


def test_a_rollout_that_failed_before_writing_is_not_a_degenerate_answer():
    answers = [_rollout(f"the answer is {i}") for i in range(3)]
    failed = [_rollout("", error="TimeoutError: episode exceeded 600.0s") for _ in range(5)]
    stats = sample_stats([*answers, *failed])
    assert stats["total"] == 3 and stats["degenerate"] == 0
    # one that errored after writing `!!!!` wrote something, and that is judged
    stats = sample_stats([*answers, _rollout("!" * 40, error="TimeoutError: episode exceeded 600.0s")])
    assert stats["total"] == 4 and stats["degenerate"] == 1
    assert sample_stats(failed) == {}
