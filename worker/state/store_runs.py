"""The store's record of runs: a run's start, result and end, its iterations and the kernel's
decisions, with the fleet's second home for them (`RunHistory`).

Words from outside (the agent's reason, an exception's text) are redacted before they are
written: no token reaches the database.
"""

from __future__ import annotations

import json
import time
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from worker.process.lazyimport import lazy

if TYPE_CHECKING:
    import sqlite3

_proc = lazy("worker.process.proc")  # its redact(), for the few rows that carry words from outside


class RunHistory(Protocol):
    """A second home for runs and decisions, visible to every machine (worker.fleet)."""

    def run_started(self, run_id: int, machine_id: str, pid: int) -> None: ...
    def run_finished(self, run_id: int, fields: dict[str, Any]) -> None: ...
    def decision(self, run_id: int | None, fields: dict[str, Any]) -> None: ...
    def others_spent_today(self, machine_id: str) -> float: ...


class StoreRuns:
    """`Store`'s runs, iterations and decisions (a mixin: the connection is the store's)."""

    db: sqlite3.Connection
    history: RunHistory | None

    if TYPE_CHECKING:

        def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def start_run(self, machine_id: str, pid: int) -> int:
        with self.transaction() as db:
            cur = db.execute(
                "INSERT INTO runs(started_at, machine_id, pid) VALUES (?, ?, ?)",
                (time.time(), machine_id, pid),
            )
            run_id = int(cur.lastrowid or 0)
        if self.history is not None:
            self.history.run_started(run_id, machine_id, pid)
        return run_id

    def finish_run(self, run_id: int, **fields: Any) -> None:
        _redact(fields, "reason")  # the agent's words, an exception's text
        if self.history is not None:
            self.history.run_finished(run_id, dict(fields))
        self._update_run(run_id, {**fields, "ended_at": time.time()})

    def record_result(self, run_id: int, **fields: Any) -> None:
        """The task's result on its run, before the source is told (the run stays open): a run
        killed after the reply or the move to `done/` leaves its completion and cost on record
        for the next run to close (worker/state/dead_runs.py)."""
        _redact(fields, "reason")
        self._update_run(run_id, fields)

    def _update_run(self, run_id: int, fields: dict[str, Any]) -> None:
        for key in ("modes", "reason_codes"):
            if key in fields:
                fields[key] = json.dumps(fields[key])
        columns = ", ".join(f"{key} = ?" for key in fields)
        with self.transaction() as db:
            db.execute(f"UPDATE runs SET {columns} WHERE id = ?", (*fields.values(), run_id))

    def add_iteration(self, run_id: int, seq: int, **fields: Any) -> None:
        _redact(fields, "reason")
        names = ["run_id", "seq", *fields]
        marks = ", ".join("?" for _ in names)
        with self.transaction() as db:
            db.execute(
                f"INSERT INTO iterations({', '.join(names)}) VALUES ({marks})",
                (run_id, seq, *fields.values()),
            )

    def record_decision(self, run_id: int | None, **fields: Any) -> int:
        _redact(fields, "error")
        if self.history is not None:
            self.history.decision(run_id, dict(fields))
        fields["reason_codes"] = json.dumps(fields.get("reason_codes", []))
        fields["candidates"] = json.dumps(fields.get("candidates", {}))
        fields["detail"] = json.dumps(fields.get("detail", {}), default=str)
        names = ["run_id", "at", *fields]
        marks = ", ".join("?" for _ in names)
        with self.transaction() as db:
            cur = db.execute(
                f"INSERT INTO decisions({', '.join(names)}) VALUES ({marks})",
                (run_id, time.time(), *fields.values()),
            )
            return int(cur.lastrowid or 0)

    def recent_runs(self, limit: int = 20) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT * FROM runs ORDER BY id DESC LIMIT ?", (limit,))
        return [_decode(dict(row)) for row in rows]

    def recent_decisions(self, limit: int = 20) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT * FROM decisions ORDER BY id DESC LIMIT ?", (limit,))
        return [_decode(dict(row)) for row in rows]

    def decision_for_run(self, run_id: int) -> dict[str, Any] | None:
        row = self.db.execute(
            "SELECT * FROM decisions WHERE run_id = ? ORDER BY id DESC LIMIT 1", (run_id,)
        ).fetchone()
        return _decode(dict(row)) if row else None

    def iterations_of(self, run_id: int) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT * FROM iterations WHERE run_id = ? ORDER BY seq", (run_id,))
        return [dict(row) for row in rows]


def _redact(fields: dict[str, Any], key: str) -> None:
    """No token reaches the database: one the agent repeated, or one in an error's text."""
    if fields.get(key):
        fields[key] = _proc.redact(str(fields[key]))


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    for key in ("modes", "reason_codes", "candidates", "detail"):
        if isinstance(row.get(key), str):
            row[key] = json.loads(row[key])
    return row
