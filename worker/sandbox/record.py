"""Which iterations ran in a sandbox, and in which runtime: a table of the store's own
`sandbox` component (migrated on first use), read by `worker show`."""

from __future__ import annotations

import json
import sqlite3

from worker.process.proc import redact
from worker.state.store import Store


def _v1(db: sqlite3.Connection) -> None:
    db.execute(
        "CREATE TABLE sandboxed_iterations ("
        " run_id INTEGER NOT NULL, seq INTEGER NOT NULL, runtime TEXT NOT NULL,"
        " refusals TEXT NOT NULL DEFAULT '[]', PRIMARY KEY (run_id, seq))"
    )


MIGRATIONS = [_v1]


def record_sandbox(
    store: Store, run_id: int, seq: int, runtime: str | None, refusals: list[str]
) -> None:
    """Note that iteration `seq` of the run ran in `runtime`, and what the box refused the
    agent, as its tools reported it (nothing when it ran unboxed)."""
    if runtime is None:
        return
    store.ensure("sandbox", MIGRATIONS)
    with store.transaction() as db:
        db.execute(
            "INSERT OR REPLACE INTO sandboxed_iterations(run_id, seq, runtime, refusals)"
            " VALUES (?, ?, ?, ?)",
            (run_id, seq, runtime, json.dumps([redact(line) for line in refusals])),
        )


def sandboxes_of(store: Store, run_id: int) -> dict[int, tuple[str, list[str]]]:
    """Each boxed iteration of the run (by seq): its runtime and what the box refused."""
    store.ensure("sandbox", MIGRATIONS)
    rows = store.db.execute(
        "SELECT seq, runtime, refusals FROM sandboxed_iterations WHERE run_id = ?", (run_id,)
    )
    return {int(seq): (str(runtime), list(json.loads(refused))) for seq, runtime, refused in rows}
