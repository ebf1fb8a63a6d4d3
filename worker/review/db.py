"""The review component's tables in the worker store: counters, reviewer state and runs,
the recent-task log reviewers read, and what each task's prompt was shown."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from worker.state.store import Store, script

COMPONENT = "review"
TASK_LOG_KEEP = 100


def _review_v1(db: sqlite3.Connection) -> None:
    script(
        db,
        """
        CREATE TABLE review_counters (key TEXT PRIMARY KEY, value REAL NOT NULL);
        CREATE TABLE review_reviewers (
            name TEXT PRIMARY KEY,
            since INTEGER NOT NULL DEFAULT 0,
            interval INTEGER,
            base INTEGER,
            last_seq INTEGER,
            runs INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE review_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            reviewer TEXT NOT NULL,
            task_seq INTEGER NOT NULL,
            trigger TEXT NOT NULL,
            outcome TEXT NOT NULL,
            bootstrap INTEGER NOT NULL DEFAULT 0,
            converging INTEGER NOT NULL DEFAULT 0,
            interval INTEGER,
            cost_usd REAL NOT NULL DEFAULT 0,
            summary TEXT NOT NULL DEFAULT '',
            findings TEXT NOT NULL DEFAULT '[]',
            error TEXT
        );
        CREATE TABLE directives (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at REAL NOT NULL,
            created_seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            source TEXT NOT NULL,
            description TEXT NOT NULL,
            rationale TEXT NOT NULL DEFAULT '',
            priority TEXT NOT NULL,
            files TEXT NOT NULL DEFAULT '[]',
            state TEXT NOT NULL DEFAULT 'pending',
            fate_at REAL,
            fate_seq INTEGER,
            fate_task TEXT,
            fate_note TEXT,
            run_id INTEGER REFERENCES review_runs(id)
        );
        CREATE INDEX directives_state ON directives(state);
        CREATE TABLE review_tasks (
            seq INTEGER PRIMARY KEY,
            task_id TEXT NOT NULL,
            at REAL NOT NULL,
            summary TEXT NOT NULL
        );
        CREATE TABLE review_shown (
            task_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            ref TEXT NOT NULL,
            PRIMARY KEY (task_id, kind, ref)
        );
        CREATE TABLE knowledge_uses (
            path TEXT PRIMARY KEY,
            ok_uses INTEGER NOT NULL DEFAULT 0,
            last_task TEXT
        );
        """,
    )


MIGRATIONS = [_review_v1]


def ensure(store: Store) -> None:
    store.ensure(COMPONENT, MIGRATIONS)


# -- counters ---------------------------------------------------------------------------------
def counter(store: Store, key: str) -> float:
    row = store.db.execute("SELECT value FROM review_counters WHERE key = ?", (key,)).fetchone()
    return float(row[0]) if row else 0.0


def set_counter(store: Store, key: str, value: float) -> None:
    with store.transaction() as db:
        db.execute(
            "INSERT INTO review_counters(key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )


def add_counter(store: Store, key: str, delta: float) -> float:
    with store.transaction() as db:
        db.execute(
            "INSERT INTO review_counters(key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = value + excluded.value",
            (key, delta),
        )
        return float(
            db.execute("SELECT value FROM review_counters WHERE key = ?", (key,)).fetchone()[0]
        )


def task_seq(store: Store) -> int:
    """How many tasks have finished since reviewing began in this workspace."""
    return int(counter(store, "task_seq"))


# -- reviewers --------------------------------------------------------------------------------
@dataclass
class ReviewerState:
    name: str
    since: int = 0  # finished tasks since the last run
    interval: int | None = None  # the doubled interval; None = the configured one
    base: int | None = None  # the configured interval the doubling started from
    last_seq: int | None = None
    runs: int = 0

    def effective_interval(self, configured: int) -> int:
        if self.interval is None or self.base != configured:
            return configured  # the user changed the setting: start again from it
        return self.interval


def reviewer_state(store: Store, name: str) -> ReviewerState:
    row = store.db.execute("SELECT * FROM review_reviewers WHERE name = ?", (name,)).fetchone()
    if row is None:
        return ReviewerState(name)
    return ReviewerState(
        name, row["since"], row["interval"], row["base"], row["last_seq"], row["runs"]
    )


def save_reviewer(store: Store, state: ReviewerState) -> None:
    with store.transaction() as db:
        db.execute(
            "INSERT OR REPLACE INTO review_reviewers(name, since, interval, base, last_seq, runs)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (state.name, state.since, state.interval, state.base, state.last_seq, state.runs),
        )


def record_run(store: Store, **fields: Any) -> int:
    fields.setdefault("at", time.time())
    fields["findings"] = json.dumps(fields.get("findings", []))
    names = list(fields)
    with store.transaction() as db:
        cur = db.execute(
            f"INSERT INTO review_runs({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})",
            tuple(fields.values()),
        )
        return int(cur.lastrowid or 0)


def recent_runs(store: Store, reviewer: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
    query = "SELECT * FROM review_runs"
    args: tuple[Any, ...] = ()
    if reviewer is not None:
        query, args = query + " WHERE reviewer = ?", (reviewer,)
    rows = store.db.execute(query + " ORDER BY id DESC LIMIT ?", (*args, limit))
    return [{**dict(row), "findings": json.loads(row["findings"])} for row in rows]


def last_answered_run(store: Store, reviewer: str) -> dict[str, Any] | None:
    """The reviewer's previous run that gave a valid answer (for convergence)."""
    row = store.db.execute(
        "SELECT * FROM review_runs WHERE reviewer = ? AND outcome = 'ok' ORDER BY id DESC LIMIT 1",
        (reviewer,),
    ).fetchone()
    return {**dict(row), "findings": json.loads(row["findings"])} if row else None


def review_cost(store: Store) -> float:
    """What the reviewers have cost in all, in USD (shown beside the tasks' cost)."""
    row = store.db.execute("SELECT COALESCE(SUM(cost_usd), 0) FROM review_runs").fetchone()
    return float(row[0])


# -- the recent-task log ----------------------------------------------------------------------
def log_task(store: Store, seq: int, task_id: str, summary: dict[str, Any]) -> None:
    with store.transaction() as db:
        db.execute(
            "INSERT OR REPLACE INTO review_tasks(seq, task_id, at, summary) VALUES (?, ?, ?, ?)",
            (seq, task_id, time.time(), json.dumps(summary, default=str)),
        )
        db.execute("DELETE FROM review_tasks WHERE seq <= ?", (seq - TASK_LOG_KEEP,))


def recent_tasks(store: Store, after_seq: int, limit: int) -> list[dict[str, Any]]:
    rows = store.db.execute(
        "SELECT summary FROM review_tasks WHERE seq > ? ORDER BY seq DESC LIMIT ?",
        (after_seq, limit),
    )
    return [json.loads(row[0]) for row in rows][::-1]


# -- what a task's prompt was shown -----------------------------------------------------------
def mark_shown(store: Store, task_id: str, kind: str, refs: list[str]) -> None:
    if not refs:
        return
    with store.transaction() as db:
        db.executemany(
            "INSERT OR IGNORE INTO review_shown(task_id, kind, ref) VALUES (?, ?, ?)",
            [(task_id, kind, ref) for ref in refs],
        )


def shown(store: Store, task_id: str, kind: str) -> list[str]:
    rows = store.db.execute(
        "SELECT ref FROM review_shown WHERE task_id = ? AND kind = ? ORDER BY ref", (task_id, kind)
    )
    return [row[0] for row in rows]


def forget_shown(store: Store, task_id: str) -> None:
    with store.transaction() as db:
        db.execute("DELETE FROM review_shown WHERE task_id = ?", (task_id,))


# -- uses of knowledge docs -------------------------------------------------------------------
def add_use(store: Store, path: str, task_id: str) -> int:
    with store.transaction() as db:
        db.execute(
            "INSERT INTO knowledge_uses(path, ok_uses, last_task) VALUES (?, 1, ?)"
            " ON CONFLICT(path) DO UPDATE SET ok_uses = ok_uses + 1,"
            " last_task = excluded.last_task",
            (path, task_id),
        )
        return int(
            db.execute("SELECT ok_uses FROM knowledge_uses WHERE path = ?", (path,)).fetchone()[0]
        )


def reset_uses(store: Store, path: str) -> None:
    with store.transaction() as db:
        db.execute("DELETE FROM knowledge_uses WHERE path = ?", (path,))
