"""What phase 0 remembers between runs, in SQLite: when each wait was last checked, the
answer found for it, what to consume once it has been resumed, and a log of reason codes.

What waits is worker's record of each wait (`wait_records`, see `worker.waits.record`); a
row of `wait_checks` belongs to one wait instance (file name + the wait's timestamp) and is
dropped when that instance is gone.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from worker.state.store import Store, script

if TYPE_CHECKING:
    import sqlite3


class WaitCode(StrEnum):
    """The closed list of reason codes phase 0 and the `waits` commands log."""

    WAIT_READY = "WAIT_READY"
    WAIT_EXPIRED = "WAIT_EXPIRED"
    WAIT_EXPIRY_REPORT_FAILED = "WAIT_EXPIRY_REPORT_FAILED"
    WAIT_QUARANTINED = "WAIT_QUARANTINED"
    WAIT_CANCELLED = "WAIT_CANCELLED"
    WAIT_CHECK_FAILED = "WAIT_CHECK_FAILED"
    WAIT_CONDITION_DEFAULTED = "WAIT_CONDITION_DEFAULTED"
    WAIT_RESUME_INTERRUPTED = "WAIT_RESUME_INTERRUPTED"  # a dead run's claim released
    ANSWER_CONSUMED = "ANSWER_CONSUMED"
    APPROVER_NOT_ALLOWED = "APPROVER_NOT_ALLOWED"
    APPROVAL_BEFORE_WAIT = "APPROVAL_BEFORE_WAIT"
    APPROVAL_EDITED = "APPROVAL_EDITED"  # a comment edited into `/approve`: maybe not its author's
    NOTE_REJECTED = "NOTE_REJECTED"
    APPROVAL_NOTED = "APPROVAL_NOTED"  # written by `worker waits approve|reject`
    MESSAGE_NOTED = "MESSAGE_NOTED"  # written by `worker intercom send`
    WAIT_STATE_UNRECORDED = "WAIT_STATE_UNRECORDED"  # a file worker did not write: refused
    WAIT_STATE_EDITED = "WAIT_STATE_EDITED"  # a file changed outside worker: edit ignored
    WAIT_ADOPTED = "WAIT_ADOPTED"  # a file taken as a wait by `worker waits adopt`
    NOTE_UNSIGNED = "NOTE_UNSIGNED"  # an intercom file not written by worker's CLI: refused
    PR_ENDED = "PR_ENDED"  # the followed pull request was merged or closed: the task ended
    PR_MERGE_BLOCKED = "PR_MERGE_BLOCKED"  # the merge label is there, something else is not


def _v1(db: sqlite3.Connection) -> None:
    script(
        db,
        """
        CREATE TABLE wait_checks (
            key TEXT PRIMARY KEY,
            stamp TEXT NOT NULL,
            task_id TEXT NOT NULL,
            checked_at REAL NOT NULL,
            answer TEXT,
            consume TEXT NOT NULL DEFAULT '[]',
            seen TEXT
        );
        CREATE TABLE wait_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            task_id TEXT NOT NULL,
            code TEXT NOT NULL,
            detail TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX wait_log_task ON wait_log(task_id);
        """,
    )


def _v2(db: sqlite3.Connection) -> None:
    """worker's record of every live wait state (`worker.waits.record`), by file name. A
    database that has seen waits before (an upgrade) adopts the files present once."""
    script(
        db,
        """
        CREATE TABLE wait_records (
            file TEXT PRIMARY KEY,
            task_id TEXT NOT NULL,
            text TEXT NOT NULL,
            saved_at REAL NOT NULL
        );
        CREATE TABLE wait_records_seed (pending INTEGER NOT NULL);
        INSERT INTO wait_records_seed SELECT 1
            WHERE EXISTS (SELECT 1 FROM wait_log) OR EXISTS (SELECT 1 FROM wait_checks);
        """,
    )


def _v3(db: sqlite3.Connection) -> None:
    """Which rules of `worker.waits.validate` (its `RULES`) each record passed when it was
    written: a record of the current rules is not checked again when read (0: older ones)."""
    db.execute("ALTER TABLE wait_records ADD COLUMN rules INTEGER NOT NULL DEFAULT 0")


def _v4(db: sqlite3.Connection) -> None:
    """The signature of each wait's file when it was last found as recorded
    (`worker.waits.record.check`): while the file keeps it, it is not read again."""
    db.execute("ALTER TABLE wait_records ADD COLUMN sig BLOB")


def _v5(db: sqlite3.Connection) -> None:
    """The allow-lists an answer was found under (`worker.waits.conditions.trust_of`): an answer
    kept while they change is checked again, so an approver taken off a list approves nothing."""
    db.execute("ALTER TABLE wait_checks ADD COLUMN trust TEXT")


MIGRATIONS = [_v1, _v2, _v3, _v4, _v5]


@dataclass
class CheckRow:
    key: str
    stamp: str
    task_id: str
    checked_at: float
    answer: str | None = None
    consume: list[str] = field(default_factory=list)
    seen: str | None = None  # the issue's `updated_at` at the last remote look
    trust: str | None = None  # the allow-lists the answer was found under


class Ledger:
    def __init__(self, store: Store) -> None:
        self.store = store
        store.ensure("waits", MIGRATIONS)

    def checks(self) -> dict[str, CheckRow]:
        cursor = self.store.db.cursor()
        cursor.row_factory = None  # plain tuples, not a `sqlite3.Row` each
        rows = cursor.execute(
            "SELECT key, stamp, task_id, checked_at, answer, consume, seen, trust FROM wait_checks"
        )
        return {
            row[0]: CheckRow(
                row[0],
                row[1],
                row[2],
                row[3],
                row[4],
                [] if row[5] == "[]" else json.loads(row[5]),  # most waits consume nothing
                row[6],
                row[7],
            )
            for row in rows
        }

    def record(self, rows: list[CheckRow]) -> None:
        if not rows:
            return
        with self.store.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO wait_checks(key, stamp, task_id, checked_at, answer,"
                " consume, seen, trust) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        r.key,
                        r.stamp,
                        r.task_id,
                        r.checked_at,
                        r.answer,
                        json.dumps(r.consume),
                        r.seen,
                        r.trust,
                    )
                    for r in rows
                ],
            )

    def forget(self, keys: list[str]) -> None:
        if keys:
            with self.store.transaction() as db:
                db.executemany("DELETE FROM wait_checks WHERE key = ?", [(k,) for k in keys])

    def log(self, task_id: str, code: str, detail: str = "", once: bool = False) -> None:
        """Append a reason code; with `once`, not when the same entry is already there."""
        detail = detail[:500]
        with self.store.transaction() as db:
            if (
                once
                and db.execute(
                    "SELECT 1 FROM wait_log WHERE task_id = ? AND code = ? AND detail = ?",
                    (task_id, str(code), detail),
                ).fetchone()
            ):
                return
            db.execute(
                "INSERT INTO wait_log(at, task_id, code, detail) VALUES (?, ?, ?, ?)",
                (time.time(), task_id, str(code), detail),
            )

    def log_of(self, task_id: str, limit: int = 50) -> list[dict[str, Any]]:
        rows = self.store.db.execute(
            "SELECT at, code, detail FROM wait_log WHERE task_id = ? ORDER BY id DESC LIMIT ?",
            (task_id, limit),
        )
        return [dict(row) for row in rows]
