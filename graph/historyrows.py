"""The metric history's rows as a run's state store keeps them, beside its newest checkpoint
(graph/checkpointer.py writes them: one msgpack row per process and step). Read here without
LangGraph, so the HTML report can draw a run's plots from its store: a check-in no longer
builds them for a snapshot that nobody may render."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

import ormsgpack

PROCESSES = ("trainer", "orchestrator")
TABLES = """
CREATE TABLE IF NOT EXISTS history_rows (
    thread_id TEXT NOT NULL,
    process TEXT NOT NULL,
    step INTEGER NOT NULL,
    row BLOB NOT NULL,
    PRIMARY KEY (thread_id, process, step)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS history_meta (
    thread_id TEXT PRIMARY KEY,
    checkpoint_id TEXT NOT NULL,
    rest BLOB NOT NULL
);
"""

Tables = dict[str, dict[int, dict[str, float]]]


def unpack_tables(rows: Iterable[tuple[tuple[str, int], bytes]]) -> Tables:
    """Per-process tables (step -> row), in step order, from ((process, step), packed row) pairs."""
    tables: Tables = {p: {} for p in PROCESSES}
    for (process, step), row in sorted(rows):
        tables.setdefault(process, {})[step] = ormsgpack.unpackb(row)
    return tables


def stored_rows(conn: sqlite3.Connection, thread_id: str) -> dict[tuple[str, int], bytes]:
    """The packed rows the tables hold for a thread, by (process, step)."""
    found = conn.execute("SELECT process, step, row FROM history_rows WHERE thread_id = ?", (thread_id,))
    return {(p, s): row for p, s, row in found}


def stored_tables(conn: sqlite3.Connection, thread_id: str) -> Tables | None:
    """The newest checkpoint's metric tables of a thread; None when the store holds no history for it."""
    try:
        rows = stored_rows(conn, thread_id)
    except sqlite3.OperationalError:  # a store that never held a history (no table yet)
        return None
    return unpack_tables(rows.items()) if rows else None
