"""The run's checkpointer: LangGraph's SqliteSaver, with the metric history stored beside the
checkpoint rather than inside it.

A checkpoint is one blob, and the history (two tables of up to 1000 steps) is 97 % of it, though a
check-in changes only a few of its rows. Stored whole, every check-in would serialise, write, read
back and validate half a MB to add a step. Here a put stores the checkpoint with an empty history
and, in the same transaction, only the history rows that changed (one row per process and step);
a get puts the history back. A monitor of one run keeps the history of the newest checkpoint in
memory once stored or loaded (`keep`), so its next check-in reads no rows at all; a watcher of many
runs does not (2.9 MB per run of 1000 steps) and reads the rows back, which costs about 2 ms.

A monitor that keeps its history keeps the whole newest checkpoint it put too (`_last`), and reads
it back from memory when the store still says it is the thread's newest, with no pending writes
(two indexed queries instead of reading and decoding the checkpoint: 0.7 -> 0.1 ms). Its values are
the objects the last check-in ended with; nodes replace state values, never change one in place.

The history in the tables is the newest checkpoint's (each put replaces it): an older checkpoint
read by id comes back with an empty history. rlagent reads only the newest; when another process
commits a newer one between the two reads, the get reads again. A checkpoint that
still holds its history (written before this store existed) is read as it is, and its next put
moves the history out.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

import ormsgpack
from langgraph.checkpoint.base import CheckpointTuple, copy_checkpoint, get_checkpoint_id, get_checkpoint_metadata
from langgraph.checkpoint.sqlite import SqliteSaver
from loguru import logger

from rlagent.graph.historyrows import PROCESSES, TABLES, stored_rows, unpack_tables
from rlagent.models.observation import MetricHistory
from rlagent.models.state import RunMemory

_REST = {"trainer", "orchestrator"}
"""The fields stored as rows; the rest of the history (baselines, evals, times, counts) is one small blob."""

RowKey = tuple[str, int]


@dataclass(frozen=True)
class _Held:
    """The history of a thread's newest checkpoint, and its rows as the tables hold them."""

    checkpoint_id: str
    history: MetricHistory
    rows: dict[RowKey, bytes]


def _pack_rows(history: MetricHistory, held: _Held | None) -> tuple[dict[RowKey, bytes], list[RowKey]]:
    """(every row packed, the rows packed anew). A row that is still the held history's row object
    keeps its packing: rows are replaced, never changed in place (agents/collector `_fresh_history`)."""
    packed = dict(held.rows) if held is not None else {}
    anew: list[RowKey] = []
    for p in PROCESSES:
        table = history.table(p)  # type: ignore[arg-type]
        before = held.history.table(p) if held is not None else {}  # type: ignore[arg-type]
        for s in before.keys() - table.keys():
            del packed[p, s]
        for s, row in table.items():
            if before.get(s) is not row:
                packed[p, s] = ormsgpack.packb(row)
                anew.append((p, s))
    return packed, anew


def _pack_rest(history: MetricHistory) -> bytes:
    return ormsgpack.packb(history.model_dump(exclude=_REST), option=ormsgpack.OPT_NON_STR_KEYS)


class RunSaver(SqliteSaver):
    def __init__(self, conn: sqlite3.Connection, *, keep: bool = True) -> None:
        super().__init__(conn)
        self.keep = keep
        self._held: dict[str, _Held] = {}
        """Thread id -> its newest checkpoint's history, when kept. A dict, so LangGraph's shallow
        clones of the saver (one per compiled graph) share it."""
        self._last: dict[str, CheckpointTuple] = {}
        """Thread id -> the newest checkpoint this saver put, as get_tuple would read it (when kept)."""

    def setup(self) -> None:
        if self.is_setup:
            return
        super().setup()
        self.conn.executescript(TABLES)

    def put(self, config, checkpoint, metadata, new_versions):
        memory = checkpoint["channel_values"].get("memory")
        thread_id = str(config["configurable"]["thread_id"])
        if not isinstance(memory, RunMemory):
            self._last.pop(thread_id, None)
            return super().put(config, checkpoint, metadata, new_versions)
        history = memory.history
        without = memory.model_copy(update={"history": MetricHistory()})
        slim = {**checkpoint, "channel_values": {**checkpoint["channel_values"], "memory": without}}
        type_, blob = self.serde.dumps_typed(slim)
        meta = json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False).encode("utf-8", "ignore")
        held = self._held.get(thread_id)
        rows, anew = _pack_rows(history, held)
        with self.lock:
            self.setup()
            try:
                before = held.rows if held is not None else self._stored_rows(thread_id)
                self.conn.executemany(
                    "INSERT OR REPLACE INTO history_rows (thread_id, process, step, row) VALUES (?, ?, ?, ?)",
                    [(thread_id, p, s, rows[p, s]) for p, s in anew if before.get((p, s)) != rows[p, s]],
                )
                self.conn.executemany(
                    "DELETE FROM history_rows WHERE thread_id = ? AND process = ? AND step = ?",
                    [(thread_id, p, s) for p, s in before.keys() - rows.keys()],
                )
                self.conn.execute(
                    "INSERT OR REPLACE INTO history_meta (thread_id, checkpoint_id, rest) VALUES (?, ?, ?)",
                    (thread_id, checkpoint["id"], _pack_rest(history)),
                )
                self.conn.execute(
                    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
                    "type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        thread_id,
                        config["configurable"]["checkpoint_ns"],
                        checkpoint["id"],
                        config["configurable"].get("checkpoint_id"),
                        type_,
                        blob,
                        meta,
                    ),
                )
                self.conn.commit()  # the checkpoint and its history rows land together, or neither
            except BaseException:
                self.conn.rollback()
                raise
        namespace, parent = config["configurable"]["checkpoint_ns"], config["configurable"].get("checkpoint_id")
        stored = {"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace, "checkpoint_id": checkpoint["id"]}}
        if self.keep:
            self._held[thread_id] = _Held(checkpoint["id"], history, rows)
            parent_config = {"configurable": {**stored["configurable"], "checkpoint_id": parent}} if parent else None
            self._last[thread_id] = CheckpointTuple(stored, copy_checkpoint(checkpoint), json.loads(meta), parent_config, [])
        return stored

    def put_writes(self, config, writes, task_id, task_path=""):
        self._last.pop(str(config["configurable"]["thread_id"]), None)  # read them back from the store
        return super().put_writes(config, writes, task_id, task_path)

    def _newest_as_put(self, config) -> CheckpointTuple | None:
        """The thread's newest checkpoint as this saver put it, if the store still says it is the
        newest and holds no pending writes for it (another process may have written since)."""
        last = self._last.get(str(config["configurable"]["thread_id"]))
        if (
            last is None
            or get_checkpoint_id(config)
            or config["configurable"].get("checkpoint_ns", "") != last.config["configurable"]["checkpoint_ns"]
        ):
            return None
        key = (last.config["configurable"]["thread_id"], last.config["configurable"]["checkpoint_ns"])
        checkpoint_id = last.config["configurable"]["checkpoint_id"]
        with self.lock:
            (newest,) = self.conn.execute(  # max() of no rows is one NULL row
                "SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?",
                key,
            ).fetchone()
            writes = self.conn.execute(
                "SELECT 1 FROM writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? LIMIT 1",
                (*key, checkpoint_id),
            ).fetchone()
        if newest != checkpoint_id or writes is not None:
            return None
        return CheckpointTuple(last.config, copy_checkpoint(last.checkpoint), dict(last.metadata), last.parent_config, [])

    def get_tuple(self, config):
        if (kept := self._newest_as_put(config)) is not None:
            return kept
        for _ in range(3):  # another process committed a newer checkpoint between two reads: read again
            found = super().get_tuple(config)
            if found is None:
                return None
            values = found.checkpoint["channel_values"]
            memory = values.get("memory")
            if memory is None or _holds_history(memory):
                return found  # no memory yet, or a checkpoint written with its history inside
            thread_id = str(found.config["configurable"]["thread_id"])
            checkpoint_id = found.config["configurable"]["checkpoint_id"]
            held = self._held.get(thread_id)
            if held is None or held.checkpoint_id != checkpoint_id:
                stored_for, held = self._load(thread_id, checkpoint_id)
                if stored_for is None or (held is None and get_checkpoint_id(config)):
                    return found  # no history stored (none yet), or an older checkpoint asked for by id
                if held is None:
                    continue
                if self.keep:
                    self._held[thread_id] = held
            if isinstance(memory, RunMemory):
                values["memory"] = memory.model_copy(update={"history": held.history})
            else:  # deserialised as plain data: LangGraph validates it into RunMemory later
                values["memory"] = {**memory, "history": held.history}
            return found
        logger.warning("the stored metric history belongs to another checkpoint than {}; not used", checkpoint_id)
        return found

    def _stored_rows(self, thread_id: str) -> dict[RowKey, bytes]:
        """The rows the tables hold (the caller holds the saver's lock)."""
        return stored_rows(self.conn, thread_id)

    def _load(self, thread_id: str, checkpoint_id: str) -> tuple[str | None, _Held | None]:
        """(the checkpoint the stored history belongs to, that history if it is `checkpoint_id`'s)."""
        with self.lock:
            self.setup()
            own = not self.conn.in_transaction
            if own:
                self.conn.execute("BEGIN")  # one snapshot for the meta row and the rows
            try:
                meta = self.conn.execute(
                    "SELECT checkpoint_id, rest FROM history_meta WHERE thread_id = ?", (thread_id,)
                ).fetchone()
                rows = self._stored_rows(thread_id) if meta is not None and meta[0] == checkpoint_id else {}
            finally:
                if own:
                    self.conn.commit()
        if meta is None or meta[0] != checkpoint_id:
            return (meta[0] if meta else None), None
        tables = unpack_tables(rows.items())
        rest = MetricHistory.model_validate(ormsgpack.unpackb(meta[1], option=ormsgpack.OPT_NON_STR_KEYS))
        history = rest.model_copy(update={"trainer": tables["trainer"], "orchestrator": tables["orchestrator"]})
        return checkpoint_id, _Held(checkpoint_id, history, rows)


def _holds_history(memory) -> bool:
    history = memory.history if isinstance(memory, RunMemory) else memory.get("history") if isinstance(memory, dict) else None
    if isinstance(history, MetricHistory):
        return bool(history.trainer or history.orchestrator)
    return isinstance(history, dict) and bool(history.get("trainer") or history.get("orchestrator"))
