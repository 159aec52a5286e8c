"""Series carried from one check-in to the next (rlagent/models/series_memo.py): whatever happens to
the table between two check-ins, each series is what building it from the whole table gives, and a
warm check-in builds points only from the rows it did not have."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from rlagent.agents.collector import _fresh_history
from rlagent.agents.rules import RuleContext, run_rules
from rlagent.graph.runner import Monitor
from rlagent.models.observation import MetricHistory
from rlagent.models.series_memo import SeriesMemo, derived_points, window_means
from rlagent.tools.layout import discover_run

from runbuilder import HRun

METRICS = ("loss", "reward", "absent")
VALUES = st.sampled_from([0.0, -0.0, 1.5, -2.0, 1e300, math.nan, math.inf, -math.inf])
ROW = st.dictionaries(st.sampled_from(METRICS[:2]), VALUES, max_size=2)

# One check-in's changes to a table, as the collector makes them: rows are added or replaced
# (never changed in place), steps dropped from the front (the window) or anywhere (a resume).
EDIT = st.one_of(
    st.tuples(st.just("put"), st.integers(0, 40), ROW),
    st.tuples(st.just("drop_oldest"), st.integers(0, 5), st.none()),
    st.tuples(st.just("drop"), st.integers(0, 40), st.none()),
    st.tuples(st.just("drop_from"), st.integers(0, 40), st.none()),
)


def apply(table: dict[int, dict[str, float]], edit) -> None:
    what, step, row = edit
    if what == "put":
        table[step] = {**table.get(step, {}), **row}  # as collector._update_row: a new row object
    elif what == "drop_oldest":
        for s in sorted(table)[:step]:
            del table[s]
    elif what == "drop":
        table.pop(step, None)
    else:
        for s in [s for s in table if s >= step]:
            del table[s]


def fresh(table, metric):
    return [(s, table[s][metric]) for s in sorted(table) if metric in table[s] and math.isfinite(table[s][metric])]


def nonfinite(_step, row):
    v = row.get("loss")
    return v if v is not None and not math.isfinite(v) else None


def same_points(a, b) -> bool:
    """Equal, NaN included (compared by repr)."""
    return [(s, repr(v)) for s, v in a] == [(s, repr(v)) for s, v in b]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(EDIT, max_size=8), min_size=1, max_size=8), st.lists(st.sampled_from(METRICS), max_size=6))
def test_each_check_ins_series_are_those_of_its_whole_table(check_ins, asked):
    memo = SeriesMemo()
    table: dict[int, dict[str, float]] = {}
    for i, edits in enumerate(check_ins):
        table = dict(table)  # a check-in's history copies the table (collector._fresh_history)
        for edit in edits:
            apply(table, edit)
        series = memo.synced("trainer", table)
        for metric in asked[i % 2 :]:  # some windows' means kept from earlier check-ins, some new
            for window in (1, 3):
                assert series.means(metric, window) == window_means(fresh(table, metric), window)
        if i % 3 != 1:  # names counted through check-ins that did not ask for them, too
            assert series.names() == {name for row in table.values() for name in row}
        for metric in [*asked[i % 2 :], *METRICS]:  # some series kept from earlier check-ins, some new
            assert series.finite(metric) == fresh(table, metric)
        assert same_points(
            series.derived("nonfinite", nonfinite), derived_points(sorted(table), [table[s] for s in sorted(table)], nonfinite)
        )


def test_a_warm_sync_keeps_the_points_of_unchanged_rows_and_builds_the_new_ones():
    memo = SeriesMemo()
    table = {s: {"reward": s / 10} for s in range(1, 1001)}
    before = memo.synced("orchestrator", table).finite("reward")
    table = dict(table)
    del table[1]  # the window slides
    table[1001] = {"reward": 100.1}
    table[500] = {"reward": -1.0}  # a row replaced (a later file's value for that step)
    after = memo.synced("orchestrator", table).finite("reward")
    assert after == fresh(table, "reward")
    assert after[0] is before[1] and after[497] is before[498]  # kept, not built again
    assert after[498] == (500, -1.0)


def test_a_warm_sync_keeps_the_means_of_unchanged_windows_and_the_names_of_unchanged_rows():
    memo = SeriesMemo()
    table = {s: {"reward": s / 10, **({"early": 1.0} if s < 3 else {})} for s in range(1, 1001)}
    series = memo.synced("orchestrator", table)
    before, names = series.means("reward", 10), series.names()
    assert names == {"reward", "early"}
    table = dict(table)
    for step in (1, 2):  # the window slides past the only rows with "early"
        del table[step]
    table[1001] = {"reward": 100.1, "late": 2.0}
    table[500] = {"reward": -1.0}  # a row replaced: the ten windows holding it are built again
    series = memo.synced("orchestrator", table)
    after = series.means("reward", 10)
    assert after == window_means(fresh(table, "reward"), 10)
    assert after[0] is before[2] and after[487] is before[489]  # the windows that end before step 500
    assert after[488][0] == before[490][0] == 500 and after[488][1] < before[490][1]
    assert series.names() == {"reward", "late"}


def test_rules_over_a_carried_history_find_what_they_find_over_the_same_history_read_back(tmp_path):
    """Across check-ins of a run that regresses, goes NaN and is resumed from an earlier step (rows
    replaced, steps dropped), the carried series give the findings a history read from the
    store gives (no memo)."""
    run = HRun(tmp_path, max_steps=400)
    mon = Monitor(discover_run(run.dir), home=tmp_path / "home", offline=True)
    found, first = [], None
    for phase in range(6):
        if phase == 3:
            run.new_attempt()
            run.step -= 25  # resumed from a checkpoint 25 steps back: those steps are logged again
        run.steps(30, reward=lambda s, p=phase: 0.8 - 0.02 * p * (s % 7), loss="nan" if phase == 4 else "0.0012")
        state = mon.check_in()
        carried = state.memory.history
        rewards = carried.table_series("orchestrator").finite("reward")
        if first is not None:
            assert rewards[0] is first  # the series was carried from the last check-in, not built again
        first = rewards[0]
        read_back = MetricHistory.model_validate(carried.model_dump())
        kept = run_rules(RuleContext.from_state(state))
        memory = state.memory.model_copy(update={"history": read_back})
        again = run_rules(RuleContext.from_state(state.model_copy(update={"memory": memory})))
        assert [f.model_dump() for f in kept] == [f.model_dump() for f in again]
        for process, metric in (("orchestrator", "reward"), ("trainer", "loss"), ("trainer", "entropy")):
            assert same_points(carried.table_series(process).finite(metric), read_back.finite_series(process, metric))
        found.append({f.id for f in kept})
    assert "nan_detected" in found[4]


def test_the_next_check_ins_history_carries_the_memo():
    old = MetricHistory(trainer={s: {"loss": 1.0} for s in range(5)})
    points = old.table_series("trainer").finite("loss")
    new = _fresh_history(old)
    new.trainer[5] = {"loss": 2.0}
    again = new.table_series("trainer").finite("loss")
    assert again[:5] == points and again[0] is points[0] and again[5] == (5, 2.0)
