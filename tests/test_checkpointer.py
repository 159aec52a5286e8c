"""The metric history is stored beside the checkpoint (graph/checkpointer.py): read back whole,
written by the rows that changed, in one transaction with the checkpoint, and an older store that
kept it inside the checkpoint is still read."""

from __future__ import annotations

import json
import sqlite3

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from rlagent.graph import checkpointer
from rlagent.graph.runner import Monitor
from rlagent.graph.store import StoreError
from rlagent.tools.layout import discover_run

from runbuilder import HRun


def monitor(run: HRun, tmp_path, keep: bool = True) -> Monitor:
    return Monitor(discover_run(run.dir), home=tmp_path / "home", offline=True, keep_history=keep)


def same(a, b) -> bool:
    """Histories alike, NaN included (NaN != NaN, but its JSON text is equal)."""
    return json.dumps(a.model_dump(mode="json"), sort_keys=True) == json.dumps(b.model_dump(mode="json"), sort_keys=True)


def rows_in(mon: Monitor) -> dict[tuple[str, int], bytes]:
    return {(p, s): r for p, s, r in mon.conn.execute("SELECT process, step, row FROM history_rows")}


def test_the_history_is_kept_out_of_the_checkpoint_and_read_back_whole_by_another_monitor(tmp_path):
    run = HRun(tmp_path)
    run.steps(30)
    run.steps(2, loss="nan")  # non-finite values must come back as they were
    mon = monitor(run, tmp_path)
    state = mon.check_in()
    history = state.memory.history
    assert len(history.trainer) == 32 and len(history.orchestrator) == 32 and history.early
    assert set(rows_in(mon)) == {(p, s) for p in ("trainer", "orchestrator") for s in history.table(p)}
    (blob,) = mon.conn.execute("SELECT checkpoint FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1").fetchone()
    assert b"Entropy" not in blob and len(blob) < 20_000  # the checkpoint holds no step rows

    other = monitor(run, tmp_path)  # a new process: nothing held, read from the rows
    assert same(other.state().memory.history, history)
    run.steps(3)
    again = other.check_in()
    assert sorted(again.memory.history.trainer) == list(range(1, 36))


@pytest.mark.parametrize("keep", [True, False], ids=["history kept", "history read back (watch)"])
def test_a_warm_check_in_writes_only_the_rows_that_changed(tmp_path, keep):
    run = HRun(tmp_path)
    run.steps(40)
    mon = monitor(run, tmp_path, keep)
    mon.check_in()
    before = rows_in(mon)
    written: list[str] = []
    mon.conn.set_trace_callback(lambda sql: sql.startswith("INSERT OR REPLACE INTO history_rows") and written.append(sql))
    run.steps(3)
    mon.check_in()
    mon.conn.set_trace_callback(None)
    after = rows_in(mon)
    changed = {k for k, row in after.items() if before.get(k) != row}
    assert {(p, s) for p in ("trainer", "orchestrator") for s in (41, 42, 43)} <= changed
    assert len(written) == len(changed) < 10  # not the 86 rows of the whole history


def test_a_failed_checkpoint_write_leaves_the_checkpoint_and_its_rows_as_they_were(tmp_path):
    run = HRun(tmp_path)
    run.steps(10)
    mon = monitor(run, tmp_path)
    mon.check_in()
    rows, head = rows_in(mon), mon._head()
    mon.conn.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON checkpoints BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END"
    )  # the checkpoint row fails after its history rows were written in the same transaction
    run.steps(5)
    with pytest.raises(StoreError, match="disk I/O error"):
        mon.check_in()
    assert rows_in(mon) == rows and mon._head() == head
    mon.conn.execute("DROP TRIGGER refuse")
    state = monitor(run, tmp_path).check_in()
    assert state.checkin == 2 and sorted(state.memory.history.trainer) == list(range(1, 16))


@pytest.mark.parametrize("keep", [True, False], ids=["history kept", "history read back (watch)"])
def test_two_monitors_taking_turns_each_see_the_other_ones_steps(tmp_path, keep):
    run = HRun(tmp_path)
    first, second = monitor(run, tmp_path, keep), monitor(run, tmp_path, keep)
    for n, mon in enumerate([first, second, first, second, first], start=1):
        run.steps(4)
        state = mon.check_in()
        assert state.checkin == n and sorted(state.memory.history.trainer) == list(range(1, 4 * n + 1))


def test_a_store_that_kept_the_history_inside_the_checkpoint_is_read_and_moved_out(tmp_path, monkeypatch):
    run = HRun(tmp_path)
    run.steps(12)
    with monkeypatch.context() as patch:
        patch.setattr(checkpointer, "RunSaver", lambda conn, keep: SqliteSaver(conn))  # as rlagent stored it before
        old = monitor(run, tmp_path)
        old.check_in()
        assert old.conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'history_rows'").fetchone() == (0,)
    mon = monitor(run, tmp_path)
    assert sorted(mon.state().memory.history.trainer) == list(range(1, 13))
    run.steps(2)
    mon.check_in()
    assert {s for p, s in rows_in(mon) if p == "trainer"} == set(range(1, 15))
    assert sorted(monitor(run, tmp_path).state().memory.history.trainer) == list(range(1, 15))


def test_a_history_stored_for_another_checkpoint_is_not_given_to_this_one(tmp_path):
    run = HRun(tmp_path)
    run.steps(6)
    mon = monitor(run, tmp_path)
    mon.check_in()
    db = sqlite3.connect(mon.dir / "state.db")
    db.execute("UPDATE history_meta SET checkpoint_id = 'another'")
    db.commit()
    db.close()
    assert monitor(run, tmp_path).state().memory.history.trainer == {}


def test_a_checkpoint_committed_between_the_two_reads_is_read_again(tmp_path, monkeypatch):
    """`rlagent status` reads a run's state without its lock: a check-in of another process may
    commit between the read of the checkpoint and the read of its history."""
    run = HRun(tmp_path)
    run.steps(5)
    reader, writer = monitor(run, tmp_path), monitor(run, tmp_path)
    writer.check_in()
    reader.state()  # the reader now holds checkpoint 1's history
    run.steps(4)
    real = SqliteSaver.get_tuple
    raced = []

    def checkpoint_then_another_check_in(self, config):
        found = real(self, config)
        if self.conn is reader.conn and not raced:  # the reader's saver (LangGraph may use a copy of it)
            raced.append(True)
            writer.check_in()  # commits checkpoint 2 and its history after the reader read checkpoint 1
        return found

    monkeypatch.setattr(SqliteSaver, "get_tuple", checkpoint_then_another_check_in)
    reader.saver._held.clear()
    state = reader.state()
    assert raced and state.checkin == 2 and sorted(state.memory.history.trainer) == list(range(1, 10))


def test_a_row_replaced_at_a_step_it_had_is_stored_anew_when_the_history_is_kept(tmp_path):
    """The kept history's packed rows are reused for the rows that are the same objects; a resumed
    run logs its steps again with other values: those rows are new, and another process reads them."""
    run = HRun(tmp_path)
    run.steps(40)
    mon = monitor(run, tmp_path)
    mon.check_in()
    run.new_attempt()
    run.step = 30
    run.steps(5, reward=lambda s: 0.9, loss="0.5")
    state = mon.check_in()
    assert state.memory.history.trainer[33]["loss"] == 0.5 and 40 not in state.memory.history.trainer
    other = monitor(run, tmp_path)
    assert same(other.state().memory.history, state.memory.history)


def test_the_newest_checkpoint_read_from_memory_is_the_one_the_store_holds(tmp_path):
    """A monitor that keeps its history reads its own newest checkpoint back from memory: the same
    checkpoint, metadata, parent and history as a saver with nothing in memory reads from the store."""
    run = HRun(tmp_path)
    run.steps(20)
    mon = monitor(run, tmp_path)
    mon.check_in()
    run.steps(2, loss="nan")
    state = mon.check_in()
    other = monitor(run, tmp_path)  # another process: nothing in memory, the state's types allowed as the graph allows them
    kept, stored = mon.graph.checkpointer.get_tuple(mon.config), other.graph.checkpointer.get_tuple(other.config)
    assert kept.checkpoint["channel_values"]["memory"] is state.memory  # from memory, not decoded again
    assert (
        kept.config == stored.config
        and kept.parent_config == stored.parent_config
        and kept.pending_writes == stored.pending_writes == []
    )
    assert kept.metadata == stored.metadata and kept.checkpoint["channel_versions"] == stored.checkpoint["channel_versions"]
    values, stored_values = kept.checkpoint["channel_values"], stored.checkpoint["channel_values"]
    assert set(values) == set(stored_values)
    for name, value in values.items():
        assert same(value, stored_values[name]) if hasattr(value, "model_dump") else value == stored_values[name]
    kept.checkpoint["channel_versions"].clear()  # what LangGraph does to a checkpoint it loaded is not seen by the next read
    assert mon.graph.checkpointer.get_tuple(mon.config).checkpoint["channel_versions"] == stored.checkpoint["channel_versions"]
