"""The progress tables and their readers: the heartbeat row per run (`run_progress`), the tools
per iteration (`iteration_tools`) and the journal (`run_events`), as `worker status`, `worker
show`, `worker log -f` and the dashboard read them.

`Tracker` (worker.state.progress) writes them; the migrations are the `operator` component's.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from worker.state.store import Store, script


def _v1(db: sqlite3.Connection) -> None:
    script(
        db,
        """
        CREATE TABLE run_progress (
            run_id INTEGER PRIMARY KEY,
            task_id TEXT NOT NULL,
            title TEXT NOT NULL DEFAULT '',
            source TEXT NOT NULL DEFAULT '',
            mode TEXT,
            model TEXT,
            iteration INTEGER NOT NULL DEFAULT 0,
            max_iterations INTEGER NOT NULL DEFAULT 0,
            started_at REAL NOT NULL,
            step_started_at REAL,
            updated_at REAL NOT NULL,
            cost_usd REAL NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            tool TEXT,
            finding TEXT
        );
        CREATE TABLE iteration_tools (
            run_id INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            tools TEXT NOT NULL DEFAULT '{}',
            files TEXT NOT NULL DEFAULT '[]',
            PRIMARY KEY (run_id, seq)
        );
        """,
    )


def _v2(db: sqlite3.Connection) -> None:
    script(
        db,
        """
        CREATE TABLE run_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id INTEGER NOT NULL,
            at REAL NOT NULL,
            text TEXT NOT NULL
        );
        CREATE INDEX run_events_by_run ON run_events(run_id, id);
        """,
    )


MIGRATIONS = [_v1, _v2]


def ensure(store: Store) -> None:
    store.ensure("operator", MIGRATIONS)


def progress_of(store: Store, run_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The heartbeat rows of these runs, by run id."""
    ensure(store)
    if not run_ids:
        return {}
    marks = ", ".join("?" for _ in run_ids)
    rows = store.db.execute(f"SELECT * FROM run_progress WHERE run_id IN ({marks})", run_ids)
    return {int(row["run_id"]): dict(row) for row in rows}


def events_after(store: Store, after_id: int, limit: int = 500) -> list[dict[str, Any]]:
    """The journal's lines after line `after_id`, oldest first (`worker log -f`)."""
    ensure(store)
    rows = store.db.execute(
        "SELECT id, run_id, at, text FROM run_events WHERE id > ? ORDER BY id LIMIT ?",
        (after_id, limit),
    )
    return [dict(row) for row in rows]


def last_event_id(store: Store) -> int:
    ensure(store)
    row = store.db.execute("SELECT COALESCE(MAX(id), 0) FROM run_events").fetchone()
    return int(row[0])


def tools_of(store: Store, run_id: int) -> dict[int, dict[str, Any]]:
    """Per iteration (its seq): the tools used with their counts, and the files written."""
    ensure(store)
    rows = store.db.execute("SELECT * FROM iteration_tools WHERE run_id = ?", (run_id,))
    return {
        int(row["seq"]): {"tools": json.loads(row["tools"]), "files": json.loads(row["files"])}
        for row in rows
    }
