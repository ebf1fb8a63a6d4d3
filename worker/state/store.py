"""SQLite runtime store: the connection, its migrations on open, transactions and cursors.

Runs, iterations and decisions are in `store_runs`, claims in `store_claims`, the core schema in
`store_schema`; `Store` is one class made of them, used the same everywhere.

WAL, synchronous=NORMAL, busy_timeout 5000 ms, BEGIN IMMEDIATE for read-modify-write
(SQLite's WAL documentation). Migrations are ordered functions per component, recorded in the
`migrations` table and run on open; each part of worker (`core`, `github`, `daemon`,
`review`, ...) brings its own list through `Store.ensure`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from worker.state.schema_version import SchemaTooNew, newer_schema
from worker.state.store_claims import ClaimBackend, StoreClaims
from worker.state.store_runs import RunHistory, StoreRuns
from worker.state.store_schema import CORE_MIGRATIONS, Migration, script

if TYPE_CHECKING:
    import sqlite3

# Importable from here as before: the schema's pieces and the fleet's two seams.
__all__ = [
    "CORE_MIGRATIONS",
    "ClaimBackend",
    "Migration",
    "RunHistory",
    "Store",
    "script",
]


class Store(StoreRuns, StoreClaims):
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
