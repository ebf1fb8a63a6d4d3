"""Many machines, one PostgreSQL: claims, leases, history, reports and orders.

Without `[fleet] database_url` nothing here is imported: psycopg takes about 100 ms to
import, and a machine on its own pays nothing for the fleet.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from worker.config import Settings
    from worker.state.store import Store


def fleet_session(settings: Settings, store: Store) -> AbstractContextManager[Any]:
    """The fleet run around a run's store (see worker.fleet.session); nothing without one."""
    if settings.fleet.enabled:
        from worker.fleet.session import attach  # the one lazy import: psycopg only for fleets

        return attach(settings, store)
    if settings.fleet.synced_inbox:
        from worker.fleet.markers import attach_markers

        return attach_markers(settings, store)
    return nullcontext()
