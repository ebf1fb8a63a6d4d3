"""The store's claims: leases on tasks, so that one run at a time works on a task.

Kept in this database, or, in a fleet, behind `ClaimBackend` (PostgreSQL, worker.fleet): every
source's claims go through the same operations either way.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import sqlite3


class ClaimBackend(Protocol):
    """Where leases live when not in this database: a fleet's PostgreSQL (worker.fleet)."""

    def claim(
        self, task_id: str, source: str, machine_id: str, pid: int, lease_s: float, **detail: Any
    ) -> bool: ...
    def renew_claim(self, task_id: str, lease_s: float) -> None: ...
    def release_claim(self, task_id: str, state: str) -> None: ...
    def expire_claim(self, task_id: str) -> bool: ...
    def note_agent(self, task_id: str, pid: int, started: str | None) -> None: ...
    def active_claims(self) -> list[dict[str, Any]]: ...
    def claim_of(self, task_id: str) -> dict[str, Any] | None: ...
    def expired_claims(self, now: float | None = None) -> list[dict[str, Any]]: ...


class StoreClaims:
    """`Store`'s leases on tasks (a mixin: the connection and the fleet's seam are the store's)."""

    db: sqlite3.Connection
    claims: ClaimBackend | None

    if TYPE_CHECKING:

        def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def claim(
        self, task_id: str, source: str, machine_id: str, pid: int, lease_s: float, **detail: Any
    ) -> bool:
        """Take a lease on a task; False while another run's lease is live. A finished task
        (done, failed) can be taken again: that is how `--task-id` reruns it."""
        if self.claims is not None:
            return self.claims.claim(task_id, source, machine_id, pid, lease_s, **detail)
        now = time.time()
        with self.transaction() as db:
            row = db.execute("SELECT * FROM claims WHERE task_id = ?", (task_id,)).fetchone()
            if row is not None and row["state"] == "active" and row["lease_until"] > now:
                return False
            db.execute(
                "INSERT OR REPLACE INTO claims(task_id, source, machine_id, run_id, pid,"
                " claimed_at, lease_until, state, detail)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?)",
                (
                    task_id,
                    source,
                    machine_id,
                    detail.get("run_id"),
                    pid,
                    now,
                    now + lease_s,
                    json.dumps(detail),
                ),
            )
            return True

    def renew_claim(self, task_id: str, lease_s: float) -> None:
        if self.claims is not None:
            return self.claims.renew_claim(task_id, lease_s)
        with self.transaction() as db:
            db.execute(
                "UPDATE claims SET lease_until = ? WHERE task_id = ? AND state = 'active'",
                (time.time() + lease_s, task_id),
            )

    def release_claim(self, task_id: str, state: str) -> None:
        """End a lease: `done`, `failed`, `waiting` or `released` (available again)."""
        if self.claims is not None:
            return self.claims.release_claim(task_id, state)
        with self.transaction() as db:
            db.execute(
                "UPDATE claims SET state = ?, lease_until = ? WHERE task_id = ?",
                (state, time.time(), task_id),
            )

    def expire_claim(self, task_id: str) -> bool:
        """Mark a lease that ran out `expired`; False when it is live again or another run
        has done it already (so only one run brings the task back)."""
        if self.claims is not None:
            return self.claims.expire_claim(task_id)
        with self.transaction() as db:
            cur = db.execute(
                "UPDATE claims SET state = 'expired' WHERE task_id = ? AND state = 'active'"
                " AND lease_until <= ?",
                (task_id, time.time()),
            )
            return cur.rowcount == 1

    def lapse_claim(self, task_id: str, pid: int) -> bool:
        """End now the lease of an active claim held by `pid`, a run known to be dead (see
        worker.process.orphans): the task comes back at once, by the path of any lease that ran out.
        A fleet's shared leases are left to their clock (False)."""
        if self.claims is not None:
            return False
        with self.transaction() as db:
            cur = db.execute(
                "UPDATE claims SET lease_until = ? WHERE task_id = ? AND state = 'active'"
                " AND pid = ? AND lease_until > ?",
                (time.time(), task_id, pid, time.time()),
            )
            return cur.rowcount == 1

    def note_agent(self, task_id: str, pid: int, started: str | None) -> None:
        """Record the agent process group working on a claimed task (see worker.process.orphans)."""
        if self.claims is not None:
            return self.claims.note_agent(task_id, pid, started)
        with self.transaction() as db:
            row = db.execute("SELECT detail FROM claims WHERE task_id = ?", (task_id,)).fetchone()
            if row is None:
                return
            detail = json.loads(row["detail"] or "{}")
            detail.update(agent_pgid=pid, agent_started=started)
            db.execute(
                "UPDATE claims SET detail = ? WHERE task_id = ?", (json.dumps(detail), task_id)
            )

    def active_claims(self) -> list[dict[str, Any]]:
        if self.claims is not None:
            return self.claims.active_claims()
        rows = self.db.execute("SELECT * FROM claims WHERE state = 'active'")
        return [dict(row) for row in rows]

    def claim_of(self, task_id: str) -> dict[str, Any] | None:
        if self.claims is not None:
            return self.claims.claim_of(task_id)
        row = self.db.execute("SELECT * FROM claims WHERE task_id = ?", (task_id,)).fetchone()
        return dict(row) if row else None

    def recover_claim(
        self, task_id: str, give_back: Callable[[dict[str, Any]], None], now: float | None = None
    ) -> bool:
        """Return an expired claim in one step: `give_back(claim)` puts the task back where it
        came from (the inbox moves its file out of `claimed/`), and the claim is released in
        the same write transaction. The task is given back before the release commits, so no
        state leaves a claim released while its file stays in `claimed/`; a crash in between
        leaves the claim expired, and the next recovery gives back again (idempotent). False
        when the claim is live (renewed, or taken again) or already released. `now` is for
        this machine's store; a fleet's leases are the database's clock."""
        if self.claims is not None:
            # The fleet's lease row: given back first, then marked expired, so a crash in
            # between leaves a lease that any run may take again, never a stranded file. Its
            # `lease_until` is the database's lease in this machine's clock as of the answer
            # (fleet/claims.py), so it is compared with the clock read after the answer: a
            # time taken before the query would see a lease expired by less than the query
            # took as live, and leave it to a later step of the run.
            claim = self.claims.claim_of(task_id)
            if claim is None or claim["state"] != "active" or claim["lease_until"] > time.time():
                return False
            give_back(claim)
            return self.claims.expire_claim(task_id)
        now = time.time() if now is None else now
        with self.transaction() as db:
            row = db.execute("SELECT * FROM claims WHERE task_id = ?", (task_id,)).fetchone()
            if row is None or row["state"] != "active" or row["lease_until"] > now:
                return False
            give_back(dict(row))
            db.execute(
                "UPDATE claims SET state = 'expired', lease_until = ? WHERE task_id = ?",
                (now, task_id),
            )
            return True

    def expired_claims(self, now: float | None = None) -> list[dict[str, Any]]:
        if self.claims is not None:
            return self.claims.expired_claims(now)
        now = time.time() if now is None else now
        rows = self.db.execute(
            "SELECT * FROM claims WHERE state = 'active' AND lease_until <= ?", (now,)
        )
        return [dict(row) for row in rows]
