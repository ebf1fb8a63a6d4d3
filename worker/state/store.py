"""SQLite runtime store: runs, iterations, decisions, claims and cursors.

WAL, synchronous=NORMAL, busy_timeout 5000 ms, BEGIN IMMEDIATE for read-modify-write
(SQLite's WAL documentation). Migrations are ordered functions per component, recorded in the
`migrations` table and run on open; each part of worker (`core`, `github`, `daemon`,
`review`, ...) brings its own list through `Store.ensure`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from worker.process.lazyimport import lazy
from worker.state.schema_version import SchemaTooNew, newer_schema

if TYPE_CHECKING:
    import sqlite3

_proc = lazy("worker.process.proc")  # its redact(), for the few rows that carry words from outside

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


class RunHistory(Protocol):
    """A second home for runs and decisions, visible to every machine (worker.fleet)."""

    def run_started(self, run_id: int, machine_id: str, pid: int) -> None: ...
    def run_finished(self, run_id: int, fields: dict[str, Any]) -> None: ...
    def decision(self, run_id: int | None, fields: dict[str, Any]) -> None: ...
    def others_spent_today(self, machine_id: str) -> float: ...


class Store:
    """One SQLite database under the state folder. Open, use, close; or use as a context.

    `claims` and `history` are the fleet's seam: None keeps everything here; a fleet run
    attaches PostgreSQL, and every source's claims then go there unchanged."""

    claims: ClaimBackend | None = None
    history: RunHistory | None = None

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._ensured: set[tuple[str, int]] = set()  # (component, migrations) applied
        self.db = self._connect()
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS migrations ("
            " component TEXT NOT NULL, version INTEGER NOT NULL, applied_at REAL NOT NULL,"
            " PRIMARY KEY (component, version))"
        )
        try:
            self.ensure("core", CORE_MIGRATIONS)
        except SchemaTooNew:
            self.db.close()
            raise

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    def _connect(self) -> sqlite3.Connection:
        # Here, not at the top: a dry run or `status` with no database never loads SQLite.
        import sqlite3

        db = sqlite3.connect(self.path, timeout=5.0, isolation_level=None)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=5000")
        return db

    def restore_file(self) -> bool:
        """If the database file was deleted under us, write it back from the open connection
        and continue on the new file; True when that happened."""
        import sqlite3  # loaded with the open connection already

        if self.path.exists():
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        target = sqlite3.connect(self.path)
        try:
            self.db.backup(target)
        finally:
            target.close()
        self.db.close()
        self.db = self._connect()
        return True

    def ensure(self, component: str, migrations: Sequence[Migration]) -> None:
        """Apply the component's migrations that this database has not seen yet, in order.
        Once per component for this store: an idle run asks eight times, the rest cost nothing."""
        done_here = (component, len(migrations))
        if done_here in self._ensured:
            return
        with self.transaction() as db:
            row = db.execute(
                "SELECT MAX(version) FROM migrations WHERE component = ?", (component,)
            ).fetchone()
            done = row[0] or 0
            if done > len(migrations):
                newer_schema(self.path, component, done, len(migrations))
            for version, migrate in enumerate(migrations, start=1):
                if version <= done:
                    continue
                migrate(db)
                db.execute(
                    "INSERT INTO migrations(component, version, applied_at) VALUES (?, ?, ?)",
                    (component, version, time.time()),
                )
        self._ensured.add(done_here)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE: take the write lock before reading, so read-modify-write is safe."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # -- runs -------------------------------------------------------------------------------
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

    # -- claims: leases on tasks ------------------------------------------------------------
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

    # -- key/value cursors ------------------------------------------------------------------
    def get(self, key: str, default: str | None = None) -> str | None:
        row = self.db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def put(self, key: str, value: str) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO kv(key, value, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value,"
                " updated_at = excluded.updated_at",
                (key, value, time.time()),
            )


def _redact(fields: dict[str, Any], key: str) -> None:
    """No token reaches the database: one the agent repeated, or one in an error's text."""
    if fields.get(key):
        fields[key] = _proc.redact(str(fields[key]))


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    for key in ("modes", "reason_codes", "candidates", "detail"):
        if isinstance(row.get(key), str):
            row[key] = json.loads(row[key])
    return row
