"""The kernel's tables: pause marks (the plan, not a flow's state) and replies already read."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from worker.state.store import Store, script

if TYPE_CHECKING:
    import sqlite3


def _v1(db: sqlite3.Connection) -> None:
    script(
        db,
        """
        CREATE TABLE kernel_paused (
            task_id TEXT PRIMARY KEY,
            order_id TEXT,
            reason TEXT NOT NULL DEFAULT '',
            at REAL NOT NULL
        );
        CREATE TABLE kernel_replies (
            reply_id TEXT PRIMARY KEY,
            task_id TEXT NOT NULL,
            signal TEXT NOT NULL,
            confidence REAL NOT NULL,
            action TEXT NOT NULL,
            at REAL NOT NULL
        );
        """,
    )


MIGRATIONS = [_v1]


def ensure(store: Store) -> Store:
    store.ensure("kernel", MIGRATIONS)
    return store


def paused_ids(store: Store) -> frozenset[str]:
    ensure(store)
    return frozenset(row[0] for row in store.db.execute("SELECT task_id FROM kernel_paused"))


def pause(store: Store, task_id: str, order_id: str | None, reason: str) -> None:
    with ensure(store).transaction() as db:
        db.execute(
            "INSERT OR REPLACE INTO kernel_paused VALUES (?, ?, ?, ?)",
            (task_id, order_id, reason, time.time()),
        )


def resume(store: Store, task_id: str) -> None:
    with ensure(store).transaction() as db:
        db.execute("DELETE FROM kernel_paused WHERE task_id = ?", (task_id,))


def replies_read(store: Store) -> frozenset[str]:
    ensure(store)
    return frozenset(row[0] for row in store.db.execute("SELECT reply_id FROM kernel_replies"))


def record_reply(
    store: Store, reply_id: str, task_id: str, signal: str, confidence: float, action: str
) -> None:
    with ensure(store).transaction() as db:
        db.execute(
            "INSERT OR REPLACE INTO kernel_replies VALUES (?, ?, ?, ?, ?, ?)",
            (reply_id, task_id, signal, confidence, action, time.time()),
        )
