"""Which iterations ran in a sandbox, and in which runtime: a table of the store's own
`sandbox` component (migrated on first use), read by `worker show`."""

from __future__ import annotations

import sqlite3

from worker.store import Store


def _v1(db: sqlite3.Connection) -> None:
    db.execute(
        "CREATE TABLE sandboxed_iterations ("
        " run_id INTEGER NOT NULL, seq INTEGER NOT NULL, runtime TEXT NOT NULL,"
        " PRIMARY KEY (run_id, seq))"
    )


MIGRATIONS = [_v1]


def record_sandbox(store: Store, run_id: int, seq: int, runtime: str | None) -> None:
    """Note that iteration `seq` of the run ran in `runtime` (nothing when it ran unboxed)."""
    if runtime is None:
        return
    store.ensure("sandbox", MIGRATIONS)
    with store.transaction() as db:
        db.execute(
            "INSERT OR REPLACE INTO sandboxed_iterations(run_id, seq, runtime) VALUES (?, ?, ?)",
            (run_id, seq, runtime),
        )


def sandboxes_of(store: Store, run_id: int) -> dict[int, str]:
    """Each boxed iteration of the run (by seq) and its runtime."""
    store.ensure("sandbox", MIGRATIONS)
    rows = store.db.execute(
        "SELECT seq, runtime FROM sandboxed_iterations WHERE run_id = ?", (run_id,)
    )
    return {int(seq): str(runtime) for seq, runtime in rows}
