"""What `worker supervise` tells its terminal or journald: the child's starts, exits and
restarts, read from the supervisor's own event table as they are recorded. A crash loop
(the supervisor rolls back or gives up with a crash-loop reason) is also a notification.
Only the control plane is imported here: no source, wait state or agent."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from worker.config import Settings
from worker.daemon.state import open_store
from worker.operator.notify import outbox
from worker.state.store import Store

log = logging.getLogger(__name__)

_WORDS = {
    "supervisor_start": "supervisor started (pid {pid})",
    "start": "child started: worker serve, pid {pid}{rev}",
    "ready": "child ready (pid {pid})",
    "exit": "child exited with code {exit_code} (pid {pid})",
    "killed": "child stopped: {reason} (pid {pid})",
    "stop": "child stopped (pid {pid}, code {exit_code})",
    "start_failed": "child could not start: {reason}",
    "restart_scheduled": "restart in {delay_s:.1f} s: {reason}",
    "give_up": "gave up: {reason}",
    "rollback": "rolled back {rev_name}: {reason}",
    "promote": "promoted {rev_name}",
    "candidate": "new revision {rev_name}",
    "build_failed": "build of {rev_name} failed: {reason}",
}


def describe(event: dict[str, Any]) -> str:
    rev = event.get("revision")
    fields = {
        **event,
        "rev": f", revision {rev[:12]}" if rev else "",
        "rev_name": rev[:12] if rev else "-",
        "delay_s": event.get("delay_s") or 0.0,
    }
    template = _WORDS.get(event["kind"], event["kind"] + " {reason}")
    return template.format(**fields).strip()


def crash_loop(settings: Settings, store: Store, reason: str, at: float) -> None:
    """Queue and send the `crash_loop` notification (retried by later runs if it fails)."""
    if not outbox.channels(settings):
        return
    outbox.enqueue(
        settings,
        store,
        "crash_loop",
        f"crash_loop:{settings.machine_id}:{at:.0f}",
        f"worker on {settings.machine_id}: crash loop",
        f"{reason}\n`worker supervise status` shows the restarts.",
    )
    outbox.flush(settings, store)


class EventWatch:
    """Reads new supervisor events every `poll_s` on a thread and hands each to `say`."""

    def __init__(self, settings: Settings, say: Callable[[str], None], poll_s: float = 0.5) -> None:
        self.settings = settings
        self.say = say
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="supervise-watch", daemon=True)
        self._last = self._latest_id()

    def __enter__(self) -> EventWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.check()  # the last events (the child's stop) are told too

    def check(self) -> None:
        try:
            with Store(self.settings.db_path) as store:
                rows = open_store(store).db.execute(
                    "SELECT * FROM supervisor_events WHERE id > ? ORDER BY id", (self._last,)
                )
                events = [dict(row) for row in rows]
                for event in events:
                    self._last = event["id"]
                    self.say(describe(event))
                    reason = str(event.get("reason") or "")
                    if event["kind"] in ("give_up", "rollback") and "crash loop" in reason:
                        crash_loop(self.settings, store, reason, event["at"])
        except (sqlite3.Error, OSError) as exc:
            log.debug("supervise: events not read: %s", exc)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.check()

    def _latest_id(self) -> int:
        try:
            with Store(self.settings.db_path) as store:
                row = open_store(store).db.execute("SELECT MAX(id) FROM supervisor_events")
                return int(row.fetchone()[0] or 0)
        except sqlite3.Error:
            return 0
