"""The core schema of the SQLite store: its migrations, and how a migration runs its SQL.

Each part of worker brings its own ordered list the same way (`Store.ensure`); these are the
`core` component's tables: runs, iterations, decisions, claims and the key/value cursors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

Migration = Callable[["sqlite3.Connection"], None]


def script(db: sqlite3.Connection, sql: str) -> None:
    """Run a migration's statements one by one inside the caller's transaction.

    `executescript()` would COMMIT first and run the rest unguarded: a second process opening
    the same new database could then apply the same migration again ("table already exists"),
    and a script failing halfway would leave half a schema that no later open could finish.
    """
    import sqlite3  # loaded with the connection `db` already

    statement = ""
    for line in sql.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            db.execute(statement)
            statement = ""
    if statement.strip():
        raise ValueError(f"an unfinished SQL statement in a migration: {statement.strip()[:80]}")


def _core_v1(db: sqlite3.Connection) -> None:
    script(
        db,
        """
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            started_at REAL NOT NULL,
            ended_at REAL,
            machine_id TEXT NOT NULL,
            pid INTEGER NOT NULL,
            task_id TEXT,
            source TEXT,
            outcome TEXT,
            reason TEXT,
            modes TEXT NOT NULL DEFAULT '[]',
            iterations INTEGER NOT NULL DEFAULT 0,
            cost_usd REAL NOT NULL DEFAULT 0,
            duration_s REAL NOT NULL DEFAULT 0,
            branch TEXT,
            reason_codes TEXT NOT NULL DEFAULT '[]'
        );
        CREATE INDEX runs_task ON runs(task_id);
        CREATE TABLE iterations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            seq INTEGER NOT NULL,
            mode TEXT NOT NULL,
            model TEXT NOT NULL,
            iteration INTEGER NOT NULL,
            status TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            reason_code TEXT,
            duration_s REAL NOT NULL,
            cost_usd REAL NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            exit_code INTEGER
        );
        CREATE TABLE decisions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id INTEGER REFERENCES runs(id),
            at REAL NOT NULL,
            machine_id TEXT NOT NULL,
            task_id TEXT,
            source TEXT,
            mode TEXT,
            reason_codes TEXT NOT NULL,
            candidates TEXT NOT NULL,
            latency_ms REAL NOT NULL,
            error TEXT,
            detail TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE claims (
            task_id TEXT PRIMARY KEY,
            source TEXT NOT NULL,
            machine_id TEXT NOT NULL,
            run_id INTEGER,
            pid INTEGER NOT NULL,
            claimed_at REAL NOT NULL,
            lease_until REAL NOT NULL,
            state TEXT NOT NULL,
            detail TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE kv (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            updated_at REAL NOT NULL
        );
        """,
    )


def _core_v2(db: sqlite3.Connection) -> None:
    """Indexes for the lookups by run (`worker why`, `worker log`) and for retention."""
    db.execute("CREATE INDEX IF NOT EXISTS iterations_run ON iterations(run_id)")
    db.execute("CREATE INDEX IF NOT EXISTS decisions_run ON decisions(run_id)")
    db.execute("CREATE INDEX IF NOT EXISTS decisions_at ON decisions(at)")


CORE_MIGRATIONS: list[Migration] = [_core_v1, _core_v2]
