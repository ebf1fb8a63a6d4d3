"""Which files in the state folder worker's own CLI wrote: the proof that a person spoke.

An approval, a message or a control order written by `worker waits approve|reject`,
`worker intercom send` or `worker cancel` is a file under the state folder, and it carries
its origin (the channel and the OS user). A file that merely appears there proves nothing:
an agent, or anything else that can write the folder, could have put it there. So the CLI also
records the SHA-256 of every file it writes in SQLite, and a reader honours a file only when
its exact bytes were recorded; any other file is refused with `NOTE_UNSIGNED`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from typing import TYPE_CHECKING

from worker.state.store import Store, script

if TYPE_CHECKING:
    import sqlite3

    from worker.config import Settings

UNSIGNED = "NOTE_UNSIGNED"


def _v1(db: sqlite3.Connection) -> None:
    script(
        db,
        """
        CREATE TABLE authored (
            digest TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            os_user TEXT NOT NULL,
            at REAL NOT NULL
        );
        """,
    )


MIGRATIONS = [_v1]


def os_user() -> str:
    """The OS account running this command: who speaks through the CLI."""
    import getpass  # here, not at the top: it loads termios, which reading a note never needs

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container without /etc/passwd)
        return f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"


def origin() -> str:
    return f"cli:{os_user()}"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sign(settings: Settings, data: bytes, kind: str) -> None:
    """Record that worker's CLI wrote a file with exactly these bytes."""
    with Store(settings.db_path) as store:
        store.ensure("authored", MIGRATIONS)
        with store.transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO authored(digest, kind, os_user, at) VALUES (?, ?, ?, ?)",
                (digest(data), kind, os_user(), time.time()),
            )


def signed(settings: Settings) -> set[str]:
    """The digests of every file the CLI wrote (read without creating the database)."""
    if not settings.db_path.exists():
        return set()
    import sqlite3  # only with a database to read

    uri = f"{settings.db_path.resolve().as_uri()}?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            return {row[0] for row in conn.execute("SELECT digest FROM authored")}
    except sqlite3.Error:
        return set()  # no table yet: nothing was ever written by the CLI


def refusal(name: str) -> str:
    return (
        f"{name}: {UNSIGNED}: not written by worker's CLI (`worker waits approve`, `worker "
        "intercom send`, `worker cancel`); a file appearing here is never an approval or an order"
    )
