"""What the inbox read remembers between runs, in SQLite: the message files that are for other
machines, each with the signature of the file it read (`worker.state.fsutil.signature`: size,
mtime, ctime, inode, mode), per scope (the mentions rule, the machine id, the folder).

An idle run over unchanged files is then a directory scan and one `lstat` per file instead
of a read per file. Only a negative answer is ever remembered ("this file mentions neither
this machine nor `all`"); a file that may concern us is read and parsed on every run, so the
index can make worker skip a file for another machine, never miss one of its own nor take
one twice.

- The signature is taken before the read: a file changed during the read is read again next
  time. A file changed within `SETTLE_NS` of the read is not remembered, and a symbolic link
  never is (`worker.state.fsutil.settled` says why).
- The index is kept on POSIX only: Windows' `st_ctime` is the creation time, which a rewrite
  leaves as it was. A database error costs the index, never the read.
- A scope no run has read for `STALE_S` is forgotten with its rows.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from worker.state.fsutil import SIGNATURE, settled, signature
from worker.state.store import Store, script

if TYPE_CHECKING:
    import sqlite3

log = logging.getLogger(__name__)

# What "mentions this machine" means (worker/sources/message.py: the machine's id or "all" as
# JSON writes it). A remembered "not ours" holds only under the rule it was decided by: change
# this when that rule changes, and every file is read again once.
MENTIONS_RULE = "id-or-all/1"
# A scope (rule, machine id, folder) that no run has read for this long is forgotten with its
# rows: an inbox folder no longer used, an older rule. Not at once: a workspace read by turns
# under two ids or folders would otherwise read every file again on every run.
STALE_S = 7 * 86400
_USED_EVERY_S = 86400  # how often a scope in use records that it still is: one write a day
SUPPORTED = os.name == "posix" and os.stat in os.supports_dir_fd
_BATCH = 50_000  # rows written per transaction (a million files is twenty)
_now_ns = time.time_ns


def _v1(db: sqlite3.Connection) -> None:
    script(
        db,
        """
        CREATE TABLE inbox_index (
            scope TEXT NOT NULL,
            name TEXT NOT NULL,
            sig BLOB NOT NULL,
            PRIMARY KEY (scope, name)
        ) WITHOUT ROWID;
        """,
    )


def _v2(db: sqlite3.Connection) -> None:
    """Each scope once, with when a run last read it; its rows keyed by its number, and read
    in the order they were written (see `IndexedRead`). The rows of v1 are dropped: the next
    run reads every file once."""
    script(
        db,
        """
        DROP TABLE inbox_index;
        CREATE TABLE inbox_scopes (
            id INTEGER PRIMARY KEY AUTOINCREMENT,  -- a forgotten scope's number never comes back
            scope TEXT NOT NULL UNIQUE,
            used_at REAL NOT NULL
        );
        CREATE TABLE inbox_index (
            scope INTEGER NOT NULL,
            name TEXT NOT NULL,
            sig BLOB NOT NULL
        );
        CREATE UNIQUE INDEX inbox_index_name ON inbox_index(scope, name);
        """,
    )


MIGRATIONS = [_v1, _v2]


class IndexedRead:
    """One read of one inbox folder with the index: pass the folder's entries through
    `unread`, tell `for_others` the files read that are not ours, then `save`."""

    def __init__(self, store: Store, folder: Path, machine_id: str) -> None:
        self.store = store
        self.scope = f"{MENTIONS_RULE}\n{machine_id}\n{folder}"  # "not ours" holds for these
        self.started_ns = _now_ns()
        store.ensure("inbox_index", MIGRATIONS)
        row = store.db.execute(
            "SELECT id, used_at FROM inbox_scopes WHERE scope = ?", (self.scope,)
        ).fetchone()
        self.scope_id: int | None = row[0] if row else None
        self.used_at: float = row[1] if row else 0.0
        cursor = store.db.cursor()
        cursor.row_factory = None  # plain tuples: a million rows without a Row object each
        # In the order the rows were written, which is the folder's order (not the names'):
        # the lookups then walk the rows in memory in turn, as they were loaded.
        cursor.execute(
            "SELECT name, sig FROM inbox_index NOT INDEXED WHERE scope = ?", (self.scope_id,)
        )
        self.known: dict[str, bytes] = dict(cursor)  # what is left at the end is gone
        self.changed: list[str] = []  # remembered, but their signature moved
        self.remember: list[tuple[str, bytes]] = []
        self.current: tuple[str, bytes] | None = None  # the file last passed on, settled
        self.fd = os.open(folder, os.O_RDONLY)  # lstat by name: no path to resolve each time

    @classmethod
    def open(cls, store: Store | None, folder: Path, machine_id: str) -> IndexedRead | None:
        """The indexed read, or None (no store, not POSIX, or the index cannot be read)."""
        if store is None or not SUPPORTED:
            return None
        import sqlite3  # loaded with the store's connection already

        try:
            return cls(store, folder, machine_id)
        except (sqlite3.Error, OSError) as exc:
            log.warning("inbox: reading every file of %s (no index: %s)", folder, exc)
            return None

    def unread(self, entries: Iterable[os.DirEntry[str]]) -> Iterator[os.DirEntry[str]]:
        """The entries to read: all but the files that were read before, are for others, and
        have not changed since (only message files, `*.json` not hidden, are ever
        remembered). One `lstat` per message file; the loop is the idle run's, hence its
        local names, and a remembered name is looked up before anything else."""
        pop, stat, pack, fd = self.known.pop, os.stat, SIGNATURE.pack, self.fd
        for entry in entries:
            name = entry.name
            old = pop(name, None)
            if old is not None:
                try:
                    st = stat(name, dir_fd=fd, follow_symlinks=False)
                    sig = pack(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)
                except OSError:
                    sig = None  # the read says what is wrong
                if sig == old:
                    continue  # for another machine, and unchanged since a run read it
                self.changed.append(name)
            self.current = self._settled(name)
            yield entry

    def _settled(self, name: str) -> tuple[str, bytes] | None:
        """The message file's name and signature, taken before it is read, if it may be
        remembered after the read (settled, and a regular file: a symbolic link never is)."""
        if not name.endswith(".json") or name.startswith("."):
            return None
        try:
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except OSError:
            return None
        return (name, signature(st)) if settled(st, self.started_ns) else None

    def for_others(self, name: str) -> None:
        """The file just read mentions neither this machine nor `all`: remember it, if settled."""
        if self.current is not None and self.current[0] == name:
            self.remember.append(self.current)

    def close(self) -> None:
        os.close(self.fd)

    def save(self) -> None:
        """After a whole pass: forget the files gone or changed, remember the new ones, and
        forget the scopes no run has read for `STALE_S`."""
        import sqlite3  # loaded with the store's connection already

        try:
            if self.scope_id is None or self.used_at < time.time() - _USED_EVERY_S:
                self._used()
            self._batched(
                "DELETE FROM inbox_index WHERE scope = ? AND name = ?", [*self.known, *self.changed]
            )
            self._batched(
                "INSERT OR REPLACE INTO inbox_index(scope, name, sig) VALUES (?, ?, ?)",
                self.remember,
            )
        except sqlite3.Error as exc:  # the next run reads those files again
            log.warning("inbox: index not updated: %s", exc)

    def _used(self) -> None:
        now = time.time()
        with self.store.transaction() as db:
            db.execute(
                "INSERT INTO inbox_scopes(scope, used_at) VALUES (?, ?)"
                " ON CONFLICT(scope) DO UPDATE SET used_at = excluded.used_at",
                (self.scope, now),
            )
            # Read again even when known: another run may have forgotten this scope while this
            # one read the folder, and the row just written has a new number.
            row = db.execute("SELECT id FROM inbox_scopes WHERE scope = ?", (self.scope,))
            self.scope_id = int(row.fetchone()[0])
            stale = (now - STALE_S,)
            db.execute(  # by the index's scope column, not a scan of every row
                "DELETE FROM inbox_index WHERE scope IN"
                " (SELECT id FROM inbox_scopes WHERE used_at < ?)",
                stale,
            )
            db.execute("DELETE FROM inbox_scopes WHERE used_at < ?", stale)
        self.used_at = now

    def _batched(self, sql: str, items: Iterable[str | tuple[str, bytes]]) -> None:
        batch: list[tuple[object, ...]] = []
        for item in items:
            batch.append((self.scope_id, item) if isinstance(item, str) else (self.scope_id, *item))
            if len(batch) >= _BATCH:
                self._write(sql, batch)
                batch = []
        if batch:
            self._write(sql, batch)

    def _write(self, sql: str, batch: list[tuple[object, ...]]) -> None:
        with self.store.transaction() as db:
            db.executemany(sql, batch)
