"""The supervisor's state in SQLite, its only source of truth (spec: "SQLite Model").

`supervisor_revisions` and `supervisor_state` are the spec's tables; `supervisor_events` is the
restart history that `worker supervise status` shows. Nothing here holds a prompt or a message:
only revisions, process ids, exit codes, delays and reasons written by the supervisor itself.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from worker.state.store import Store, script

COMPONENT = "daemon"
STATE_KEYS = ("current_good_rev", "candidate_rev", "last_failure_reason")


def _daemon_v1(db: sqlite3.Connection) -> None:
    script(
        db,
        """
        CREATE TABLE supervisor_revisions (
            revision TEXT PRIMARY KEY,
            build_ok INTEGER,
            health_ok INTEGER,
            promoted_at REAL,
            failure_reason TEXT,
            first_seen_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE supervisor_state (
            key TEXT PRIMARY KEY,
            value TEXT,
            updated_at REAL NOT NULL
        );
        CREATE TABLE supervisor_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            kind TEXT NOT NULL,
            revision TEXT,
            pid INTEGER,
            exit_code INTEGER,
            delay_s REAL,
            reason TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX supervisor_events_at ON supervisor_events(at);
        """,
    )


MIGRATIONS = [_daemon_v1]


@dataclass(frozen=True)
class Snapshot:
    current_good_rev: str | None
    candidate_rev: str | None
    last_failure_reason: str | None


def open_store(store: Store) -> Store:
    """Create or upgrade the daemon's tables; returns the same store for chaining."""
    store.ensure(COMPONENT, MIGRATIONS)
    return store


class SupervisorState:
    """Reads and writes of the daemon tables. Each write is its own BEGIN IMMEDIATE."""

    def __init__(self, store: Store) -> None:
        self.store = open_store(store)

    def snapshot(self) -> Snapshot:
        rows = self.store.db.execute("SELECT key, value FROM supervisor_state").fetchall()
        values = {row["key"]: row["value"] for row in rows}
        return Snapshot(*(values.get(key) for key in STATE_KEYS))

    def set(self, **values: str | None) -> None:
        unknown = set(values) - set(STATE_KEYS)
        if unknown:
            raise ValueError(f"not supervisor state keys: {sorted(unknown)}")
        now = time.time()
        with self.store.transaction() as db:
            for key, value in values.items():
                db.execute(
                    "INSERT INTO supervisor_state(key, value, updated_at) VALUES (?, ?, ?)"
                    " ON CONFLICT(key) DO UPDATE SET value = excluded.value,"
                    " updated_at = excluded.updated_at",
                    (key, value, now),
                )

    # -- revisions ----------------------------------------------------------------------------
    def revision(self, rev: str) -> dict[str, Any] | None:
        row = self.store.db.execute(
            "SELECT * FROM supervisor_revisions WHERE revision = ?", (rev,)
        ).fetchone()
        return dict(row) if row else None

    def update_revision(self, rev: str, **fields: Any) -> None:
        """Insert the revision if new, then set the given columns."""
        allowed = {"build_ok", "health_ok", "promoted_at", "failure_reason"}
        if set(fields) - allowed:
            raise ValueError(f"not revision columns: {sorted(set(fields) - allowed)}")
        now = time.time()
        with self.store.transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO supervisor_revisions(revision, first_seen_at, updated_at)"
                " VALUES (?, ?, ?)",
                (rev, now, now),
            )
            if fields:
                columns = ", ".join(f"{key} = ?" for key in fields)
                db.execute(
                    f"UPDATE supervisor_revisions SET {columns}, updated_at = ? WHERE revision = ?",
                    (*fields.values(), now, rev),
                )

    def revisions(self, limit: int = 20) -> list[dict[str, Any]]:
        rows = self.store.db.execute(
            "SELECT * FROM supervisor_revisions ORDER BY first_seen_at DESC LIMIT ?", (limit,)
        )
        return [dict(row) for row in rows]

    def failed(self, rev: str) -> bool:
        """A revision that failed its build or its health window is never retried."""
        row = self.revision(rev)
        return bool(row and (row["build_ok"] == 0 or row["health_ok"] == 0))

    # -- restart history ----------------------------------------------------------------------
    def event(
        self,
        kind: str,
        *,
        revision: str | None = None,
        pid: int | None = None,
        exit_code: int | None = None,
        delay_s: float | None = None,
        reason: str = "",
    ) -> None:
        with self.store.transaction() as db:
            db.execute(
                "INSERT INTO supervisor_events(at, kind, revision, pid, exit_code, delay_s,"
                " reason) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (time.time(), kind, revision, pid, exit_code, delay_s, reason),
            )

    def events(self, limit: int = 50, kind: str | None = None) -> list[dict[str, Any]]:
        """The most recent events, oldest first."""
        if kind is None:
            rows = self.store.db.execute(
                "SELECT * FROM supervisor_events ORDER BY id DESC LIMIT ?", (limit,)
            )
        else:
            rows = self.store.db.execute(
                "SELECT * FROM supervisor_events WHERE kind = ? ORDER BY id DESC LIMIT ?",
                (kind, limit),
            )
        return [dict(row) for row in reversed(rows.fetchall())]

    # -- kv cursors: the supervisor's own presence --------------------------------------------
    def put_json(self, key: str, value: dict[str, Any]) -> None:
        self.store.put(key, json.dumps(value, sort_keys=True))

    def get_json(self, key: str) -> dict[str, Any] | None:
        raw = self.store.get(key)
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None
