"""Inbox claims in a synced folder, without a database: claim markers, the earliest claim
wins, after a settle window.

A folder synced between machines (Google Drive, Dropbox, Syncthing) makes a rename atomic on
one machine only: two machines can each move the same message into their `claimed/`. So,
before its usual claim, a run writes a marker of its own,
`<inbox>/claim-markers/<message id>/<machine>.<pid>.<run>.json` (each machine writes only its
own files: the sync never has to merge one), waits `[fleet] settle_s` for the other machines'
markers to arrive, and takes the message only if its marker is the earliest live one
(by the time written in it, then machine id). This is the GitHub source's rule (the earliest
claim comment wins) with the sync in the role of GitHub.

What it guarantees, honestly: at most once **as long as the sync delivers a marker within
the settle window** and the machines' clocks agree to well within it (NTP). A sync slower
than the window can let two machines run the same message; PostgreSQL (`[fleet]
database_url`) has no such window and is the answer when that matters.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from worker.config import Settings
from worker.state.fsutil import atomic_write_text
from worker.state.store import Store

log = logging.getLogger(__name__)

FOLDER = "claim-markers"
SOURCE = "inbox"  # the one source whose claims live in a shared folder
# Marker states of runs that did not take the message to an end.
_NOT_RUN = frozenset({"active", "lost", "released", "expired"})


class MarkerClaims:
    """The Store's ClaimBackend on a machine sharing a synced inbox: inbox claims pass the
    marker rule first; everything else is the machine's own SQLite store, unchanged."""

    def __init__(
        self, local: Store, inbox: Path, machine_id: str, settle_s: float, lease_s: float
    ) -> None:
        self.local = local  # a Store with no backend attached: the SQLite claims
        self.root = inbox / FOLDER
        self.machine_id = machine_id
        self.settle_s = settle_s
        self.lease_s = lease_s
        self.mine: dict[str, Path] = {}

    # -- the marker rule ----------------------------------------------------------------------
    def claim(
        self, task_id: str, source: str, machine_id: str, pid: int, lease_s: float, **detail: Any
    ) -> bool:
        if source == SOURCE and not self._win(task_id, pid, detail.get("run_id")):
            return False
        return self.local.claim(task_id, source, machine_id, pid, lease_s, **detail)

    def _win(self, task_id: str, pid: int, run: Any) -> bool:
        if self._ran(task_id) or self._markers(task_id, live_only=True):
            return False  # another machine holds it or ran it: no marker, no wait
        folder = self.root / quote(task_id, safe="-_.")
        path = folder / f"{quote(self.machine_id, safe='-_.')}.{pid}.{run}.json"
        now = time.time()
        self._write(path, {"task": task_id, "machine": self.machine_id, "pid": pid,
                           "run": run, "at": now, "renewed": now, "state": "active"})  # fmt: skip
        time.sleep(self.settle_s)  # let the other machines' markers arrive
        live = self._markers(task_id, live_only=True)
        first = min(live, key=lambda m: (m[1]["at"], m[1]["machine"], str(m[0])), default=None)
        if first is None or first[0] != path or self._ran(task_id):
            self._end(path, "lost")
            log.info("inbox: %s was claimed first by another machine", task_id)
            return False
        self.mine[task_id] = path
        return True

    def _markers(self, task_id: str, live_only: bool) -> list[tuple[Path, dict[str, Any]]]:
        """The task's markers (only the live ones: active, lease not run out)."""
        folder = self.root / quote(task_id, safe="-_.")
        if not folder.is_dir():
            return []
        now, found = time.time(), []
        for path in sorted(folder.glob("*.json")):
            marker = _read(path)
            if marker is None:
                continue
            live = marker.get("state") == "active" and (
                float(marker.get("renewed", 0)) + self.lease_s > now
            )
            if live or not live_only:
                found.append((path, marker))
        return found

    def _ran(self, task_id: str) -> bool:
        """A run took the message to an end (success, failure, waiting, cancelled)."""
        return any(
            marker.get("state") not in _NOT_RUN
            for _, marker in self._markers(task_id, live_only=False)
        )

    def _write(self, path: Path, marker: dict[str, Any]) -> None:
        atomic_write_text(path, json.dumps({"schema_version": 1, **marker}) + "\n")

    def _end(self, path: Path, state: str) -> None:
        marker = _read(path)
        if marker is not None:
            self._write(path, {**marker, "state": state})

    # -- the rest: the SQLite claims, and the marker kept in step ------------------------------
    def renew_claim(self, task_id: str, lease_s: float) -> None:
        path = self.mine.get(task_id)
        marker = _read(path) if path else None
        if path is not None and marker is not None:
            self._write(path, {**marker, "renewed": time.time()})
        self.local.renew_claim(task_id, lease_s)

    def release_claim(self, task_id: str, state: str) -> None:
        path = self.mine.pop(task_id, None)
        if path is not None:
            self._end(path, state)
        self.local.release_claim(task_id, state)

    def expire_claim(self, task_id: str) -> bool:
        return self.local.expire_claim(task_id)

    def note_agent(self, task_id: str, pid: int, started: str | None) -> None:
        self.local.note_agent(task_id, pid, started)

    def active_claims(self) -> list[dict[str, Any]]:
        return self.local.active_claims()

    def claim_of(self, task_id: str) -> dict[str, Any] | None:
        return self.local.claim_of(task_id)

    def expired_claims(self, now: float | None = None) -> list[dict[str, Any]]:
        return self.local.expired_claims(now)


def _read(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # vanished, or a half-synced file: not a marker (yet)
    return data if isinstance(data, dict) and "at" in data and "machine" in data else None


@contextmanager
def attach_markers(settings: Settings, store: Store) -> Iterator[MarkerClaims]:
    """Route the store's claims through the marker rule for the length of a run."""
    local = Store(settings.db_path)
    claims = MarkerClaims(
        local, settings.inbox, settings.machine_id, settings.fleet.settle_s,
        settings.lease_seconds,
    )  # fmt: skip
    store.claims = claims
    try:
        yield claims
    finally:
        store.claims = None
        local.close()
