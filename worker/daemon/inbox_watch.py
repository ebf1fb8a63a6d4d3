"""Cheap "did a new message arrive?" polling of the inbox folder, for `worker serve` only.

One stat() per poll: a folder's mtime changes when an entry is added, removed or renamed, and
only then are the names listed. Only names never seen before count, so a message moving into
`claimed/` or being removed does not wake the loop. Contents are never read here.
Portable by design (inotify is Linux-only; synced folders often miss native events anyway).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

# Folder mtimes tick coarsely on some filesystems (FAT: 2 s, ext4: a jiffy); while the folder
# changed this recently, list it anyway so a file added in the same tick is not missed.
_COARSE_NS = 2_000_000_000


class InboxWatch:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._mtime: int | None = None
        self._names: set[str] = set()

    def prime(self) -> None:
        """Remember what is there now; later calls report only what arrives after."""
        self._mtime = self._stat()
        self._names = self._list()

    def has_new_files(self) -> bool:
        mtime = self._stat()
        if mtime == self._mtime and (mtime is None or time.time_ns() - mtime > _COARSE_NS):
            return False
        self._mtime = mtime
        names = self._list()
        new = names - self._names
        self._names = names
        return bool(new)

    def _stat(self) -> int | None:
        try:
            return os.stat(self.folder).st_mtime_ns
        except OSError:
            return None

    def _list(self) -> set[str]:
        try:
            with os.scandir(self.folder) as entries:
                return {e.name for e in entries if not e.name.startswith(".") and e.is_file()}
        except OSError:
            return set()
