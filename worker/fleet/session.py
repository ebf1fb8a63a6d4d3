"""A fleet run: the Store's claims and history on PostgreSQL, and a heartbeat beside the run.

The heartbeat thread, every `[fleet] heartbeat_s`, extends the leases this process holds
(a live run never loses its task, a dead one's lease runs out), marks the process alive, and
copies this machine's status report into the database when the supervisor has written a new one.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from worker.config import Settings
from worker.fleet.claims import PgClaims
from worker.fleet.db import FleetUnavailable
from worker.fleet.history import PgHistory
from worker.fleet.link import Link
from worker.state.store import Store
from worker.supervision.reports import report_path

log = logging.getLogger(__name__)

_current: list[Link] = []  # the link of the fleet run in this process, if one is under way
# A connection kept between the runs of one process (`worker serve`): a password login costs
# more than all of an idle run's statements, and a fleet's database more than its queries.
_parked: dict[str, Link] = {}
_published: dict[Path, float] = {}  # status report -> the mtime of the version last sent


def current_link() -> Link | None:
    return _current[-1] if _current else None


@contextmanager
def attach(settings: Settings, store: Store) -> Iterator[Link]:
    """Connect (FleetUnavailable, exit 75, before anything is claimed), route the store's
    claims and history to the fleet database, beat until the run ends."""
    link = _parked.pop(settings.fleet.database_url or "", None) or Link(settings.fleet)
    pid = os.getpid()
    claims = PgClaims(link, settings.machine_id, pid)
    history = PgHistory(link, settings.machine_id, pid)
    store.claims, store.history = claims, history
    stop = threading.Event()
    beat = threading.Thread(
        target=_heartbeat, args=(settings, claims, history, stop), name="fleet-heartbeat"
    )
    _current.append(link)
    beat.start()
    try:
        yield link
    finally:
        stop.set()
        beat.join()
        _current.remove(link)
        try:
            _publish(history, report_path(settings.reports, settings.machine_id))
        except FleetUnavailable as exc:
            log.warning("fleet: could not publish the status report: %s", exc)
        store.claims = store.history = None
        _park(settings, link)


def _heartbeat(
    settings: Settings, claims: PgClaims, history: PgHistory, stop: threading.Event
) -> None:
    report = report_path(settings.reports, settings.machine_id)
    while not stop.wait(settings.fleet.heartbeat_s):
        try:
            claims.renew_all(settings.lease_seconds)
            history.beat()
            _publish(history, report)
        except Exception as exc:  # a beat never ends the run; the run sees an outage itself
            log.warning("fleet heartbeat: %s", exc)


def _publish(history: PgHistory, report: Path) -> None:
    """Send the status report when the supervisor has written a new one since the last send."""
    try:
        mtime = report.stat().st_mtime
    except OSError:
        return  # no report yet
    if _published.get(report, 0.0) < mtime:
        history.publish_report(report)
        _published[report] = mtime


def _park(settings: Settings, link: Link) -> None:
    old = _parked.pop(settings.fleet.database_url or "", None)
    if old is not None:
        old.close()
    _parked[settings.fleet.database_url or ""] = link


def close_parked() -> None:
    """Close the connections kept for a next run (at exit, or when a test is done)."""
    while _parked:
        _parked.popitem()[1].close()


atexit.register(close_parked)
