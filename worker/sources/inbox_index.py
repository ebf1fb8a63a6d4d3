"""What the inbox read remembers between runs, in SQLite: the message files that are for other
machines, each with the signature of the file it read (size, mtime, ctime, inode).

An idle run over unchanged files is then a directory scan and one `lstat` per file instead
of a read per file. Only a negative answer is ever remembered ("this file mentions neither
this machine nor `all`"); a file that may concern us is read and parsed on every run, so the
index can make worker skip a file for another machine, never miss one of its own nor take
one twice.

- The signature is taken before the read: a file changed during the read is read again next
  time.
- A file last changed (mtime or ctime) within `SETTLE_NS` of the read is not remembered: a
  rewrite within the same tick of the file system's clock (2 s for FAT's mtime, a few ms for
  ctime on Linux) would leave the signature as it was; a file settled before the read cannot
  be rewritten within its tick afterwards.
- ctime cannot be set by a program (`utime` sets it to now), so a file put back with an old
  mtime and the same size is still read again; a file replaced by a rename has a new inode.
- A symbolic link is always read (its target may change under the same link).
- The index is kept on POSIX only: Windows' `st_ctime` is the creation time, which a rewrite
  leaves as it was. A database error costs the index, never the read.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import struct
import time
from collections.abc import Iterable
from pathlib import Path

from worker.store import Store, script

log = logging.getLogger(__name__)

SETTLE_NS = 2_000_000_000
# What "mentions this machine" means (worker/sources/message.py: the machine's id or "all" as
# JSON writes it). A remembered "not ours" holds only under the rule it was decided by: change
# this when that rule changes, and every file is read again once.
MENTIONS_RULE = "id-or-all/1"
SUPPORTED = os.name == "posix" and os.stat in os.supports_dir_fd
_PACK = struct.Struct("<QqqQ").pack  # size, mtime_ns, ctime_ns, inode: exact, 32 bytes
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


MIGRATIONS = [_v1]


class IndexedRead:
    """One read of one inbox folder with the index: ask `unchanged` of each message file
    before reading it, tell `for_others` the files read that are not ours, then `save`."""

    def __init__(self, store: Store, folder: Path, machine_id: str) -> None:
        self.store = store
        self.scope = f"{MENTIONS_RULE}\n{machine_id}\n{folder}"  # "not ours" holds for these
        self.started_ns = _now_ns()
        store.ensure("inbox_index", MIGRATIONS)
        cursor = store.db.cursor()
        cursor.row_factory = None  # plain tuples: a million rows without a Row object each
        cursor.execute("SELECT name, sig FROM inbox_index WHERE scope = ?", (self.scope,))
        self.known: dict[str, bytes] = dict(cursor)  # what is left at the end is gone
        self.changed: list[str] = []  # remembered, but their signature moved
        self.remember: list[tuple[str, bytes]] = []
        self.current: tuple[str, bytes] | None = None  # the file just asked about, settled
        self.fd = os.open(folder, os.O_RDONLY)  # lstat by name: no path to resolve each time

    @classmethod
    def open(cls, store: Store | None, folder: Path, machine_id: str) -> IndexedRead | None:
        """The indexed read, or None (no store, not POSIX, or the index cannot be read)."""
        if store is None or not SUPPORTED:
            return None
        try:
            return cls(store, folder, machine_id)
        except (sqlite3.Error, OSError) as exc:
            log.warning("inbox: reading every file of %s (no index: %s)", folder, exc)
            return None

    def unchanged(self, entry: os.DirEntry[str]) -> bool:
        """True: the file was read before, is for others, and has not changed since."""
        self.current = None
        if entry.is_symlink():
            return False
        name = entry.name
        try:
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except OSError:
            return False  # the read says what is wrong
        sig = _PACK(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        old = self.known.pop(name, None)
        if old == sig:
            return True
        if old is not None:
            self.changed.append(name)
        if max(st.st_mtime_ns, st.st_ctime_ns) < self.started_ns - SETTLE_NS:
            self.current = (name, sig)
        return False

    def for_others(self, name: str) -> None:
        """The file just read mentions neither this machine nor `all`: remember it, if settled."""
        if self.current is not None and self.current[0] == name:
            self.remember.append(self.current)

    def close(self) -> None:
        os.close(self.fd)

    def save(self) -> None:
        """After a whole pass: forget the files gone or changed, remember the new ones."""
        try:
            self._batched(
                "DELETE FROM inbox_index WHERE scope = ? AND name = ?", [*self.known, *self.changed]
            )
            self._batched(
                "INSERT OR REPLACE INTO inbox_index(scope, name, sig) VALUES (?, ?, ?)",
                self.remember,
            )
        except sqlite3.Error as exc:  # the next run reads those files again
            log.warning("inbox: index not updated: %s", exc)

    def _batched(self, sql: str, items: Iterable[str | tuple[str, bytes]]) -> None:
        batch: list[tuple[object, ...]] = []
        for item in items:
            batch.append((self.scope, item) if isinstance(item, str) else (self.scope, *item))
            if len(batch) >= _BATCH:
                self._write(sql, batch)
                batch = []
        if batch:
            self._write(sql, batch)

    def _write(self, sql: str, batch: list[tuple[object, ...]]) -> None:
        with self.store.transaction() as db:
            db.executemany(sql, batch)
