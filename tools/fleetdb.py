"""The fleet's tables in a run's own state store (the SQLite file that also holds its LangGraph
checkpoints): incidents, silences, the notification outbox, and small documents (the run's
summary row and report snapshot, its retirement).

Plain sqlite3 on a connection the caller owns: `rlagent silence`, `ack`, `status` and `report`
read and write these without loading LangGraph. Rows are a few indexed columns plus the model as
JSON, so a model can grow fields without a migration. Webhook URLs are never stored: an outbox
row names its destination by a hash of the URL.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

from rlagent.models.incidents import Incident, IncidentStatus, Silence

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rlagent_incidents (
    id INTEGER PRIMARY KEY AUTOINCREMENT, finding_id TEXT NOT NULL, open INTEGER NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS rlagent_incidents_open ON rlagent_incidents (open, finding_id);
CREATE TABLE IF NOT EXISTS rlagent_silences (
    id INTEGER PRIMARY KEY AUTOINCREMENT, finding_id TEXT NOT NULL, until TEXT NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rlagent_outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT, dest TEXT NOT NULL, created TEXT NOT NULL, rounds INTEGER NOT NULL DEFAULT 0,
    last_error TEXT, delivered INTEGER NOT NULL DEFAULT 0, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rlagent_docs (key TEXT PRIMARY KEY, body TEXT NOT NULL);
"""

KEEP_RESOLVED = 200
"""Resolved incidents kept per run (the report marks them on the step axis)."""


class OutboxRow(BaseModel):
    id: int
    dest: str
    """Hash of the destination URL (never the URL)."""
    rounds: int
    """Delivery rounds tried so far."""
    last_error: str | None
    body: str
    """The JSON payload, exactly as it will be posted."""


class FleetDB:
    """The fleet tables of one run's state store."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        with self.conn:
            self.conn.executescript(_SCHEMA)

    @classmethod
    def open(cls, db_path: Path, *, create: bool = True) -> FleetDB | None:
        """Its own connection to a state store; None when the store does not exist and `create` is False."""
        if not create and not db_path.exists():
            return None
        db_path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(db_path, check_same_thread=False, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        return cls(conn)

    def close(self) -> None:
        self.conn.close()

    # --- incidents -------------------------------------------------------------------------

    def open_incidents(self) -> dict[str, Incident]:
        rows = self.conn.execute("SELECT id, body FROM rlagent_incidents WHERE open = 1 ORDER BY id").fetchall()
        return {inc.finding_id: inc for inc in (_incident(r) for r in rows)}

    def incidents(self, limit: int = KEEP_RESOLVED) -> list[Incident]:
        """Open ones and the newest resolved ones, oldest first."""
        rows = self.conn.execute(
            "SELECT id, body FROM rlagent_incidents WHERE open = 1 OR id IN "
            "(SELECT id FROM rlagent_incidents WHERE open = 0 ORDER BY id DESC LIMIT ?) ORDER BY id",
            (limit,),
        ).fetchall()
        return [_incident(r) for r in rows]

    def unannounced_resolved(self) -> list[Incident]:
        rows = self.conn.execute("SELECT id, body FROM rlagent_incidents WHERE open = 0 ORDER BY id DESC LIMIT ?", (50,))
        return [inc for inc in (_incident(r) for r in rows) if not inc.announced_resolved]

    def save_incident(self, incident: Incident) -> Incident:
        is_open = int(incident.status is IncidentStatus.OPEN)
        if incident.id:
            self.conn.execute(
                "UPDATE rlagent_incidents SET open = ?, body = ? WHERE id = ?",
                (is_open, incident.model_dump_json(), incident.id),
            )
            return incident
        cur = self.conn.execute(
            "INSERT INTO rlagent_incidents (finding_id, open, body) VALUES (?, ?, ?)",
            (incident.finding_id, is_open, incident.model_dump_json()),
        )
        saved = incident.model_copy(update={"id": cur.lastrowid})
        self.conn.execute("UPDATE rlagent_incidents SET body = ? WHERE id = ?", (saved.model_dump_json(), saved.id))
        return saved

    def prune_resolved(self, keep: int = KEEP_RESOLVED) -> None:
        self.conn.execute(
            "DELETE FROM rlagent_incidents WHERE open = 0 AND id NOT IN "
            "(SELECT id FROM rlagent_incidents WHERE open = 0 ORDER BY id DESC LIMIT ?)",
            (keep,),
        )

    # --- silences --------------------------------------------------------------------------

    def add_silence(self, silence: Silence) -> Silence:
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO rlagent_silences (finding_id, until, body) VALUES (?, ?, ?)",
                (silence.finding_id, silence.until.isoformat(), silence.model_dump_json()),
            )
            saved = silence.model_copy(update={"id": cur.lastrowid})
            self.conn.execute("UPDATE rlagent_silences SET body = ? WHERE id = ?", (saved.model_dump_json(), saved.id))
        return saved

    def silences(self, now: datetime | None = None) -> list[Silence]:
        """Silences in force at `now` (all of them when `now` is None), oldest first."""
        rows = self.conn.execute("SELECT body FROM rlagent_silences ORDER BY id").fetchall()
        found = [Silence.model_validate_json(r[0]) for r in rows]
        return [s for s in found if now is None or now < s.until]

    def remove_silence(self, silence_id: int) -> bool:
        with self.conn:
            return self.conn.execute("DELETE FROM rlagent_silences WHERE id = ?", (silence_id,)).rowcount > 0

    # --- the outbox ------------------------------------------------------------------------

    def enqueue(self, dest: str, body: str, created: datetime) -> None:
        self.conn.execute("INSERT INTO rlagent_outbox (dest, created, body) VALUES (?, ?, ?)", (dest, created.isoformat(), body))

    def undelivered(self) -> list[OutboxRow]:
        rows = self.conn.execute(
            "SELECT id, dest, rounds, last_error, body FROM rlagent_outbox WHERE delivered = 0 ORDER BY id"
        ).fetchall()
        return [OutboxRow(id=r[0], dest=r[1], rounds=r[2], last_error=r[3], body=r[4]) for r in rows]

    def delivery_done(self, row_id: int, ok: bool, error: str | None = None) -> None:
        with self.conn:
            if ok:
                self.conn.execute("UPDATE rlagent_outbox SET delivered = 1, rounds = rounds + 1 WHERE id = ?", (row_id,))
            else:
                self.conn.execute("UPDATE rlagent_outbox SET rounds = rounds + 1, last_error = ? WHERE id = ?", (error, row_id))
            # Delivered rows are history: keep the newest few for `status`.
            self.conn.execute(
                "DELETE FROM rlagent_outbox WHERE delivered = 1 AND id NOT IN "
                "(SELECT id FROM rlagent_outbox WHERE delivered = 1 ORDER BY id DESC LIMIT 20)"
            )

    def drop(self, row_id: int) -> None:
        with self.conn:
            self.conn.execute("DELETE FROM rlagent_outbox WHERE id = ?", (row_id,))

    # --- documents -------------------------------------------------------------------------

    def put(self, key: str, body: str) -> None:
        self.conn.execute(
            "INSERT INTO rlagent_docs (key, body) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET body = excluded.body",
            (key, body),
        )

    def get(self, key: str) -> str | None:
        row = self.conn.execute("SELECT body FROM rlagent_docs WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def delete(self, key: str) -> None:
        with self.conn:
            self.conn.execute("DELETE FROM rlagent_docs WHERE key = ?", (key,))

    def commit(self) -> None:
        self.conn.commit()


def _incident(row: tuple) -> Incident:
    return Incident.model_validate_json(row[1]).model_copy(update={"id": row[0]})
