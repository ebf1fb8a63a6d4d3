"""One connection to the fleet database that survives a database restart.

Every statement goes through `Link.run`: when the connection is lost (the server restarted,
the network blinked), it reconnects and runs the statement again, for up to `retry_s`
seconds, then raises FleetUnavailable. A statement whose reply was lost is sent again: a
repeated claim by the same run finds its own lease and succeeds; the worst a repeated history
insert does is leave one extra row.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_before_delay,
    wait_exponential,
)

from worker.fleet.db import Conn, FleetUnavailable, connect, describe, psycopg, unavailable
from worker.fleet.settings import FleetSettings

log = logging.getLogger(__name__)


class Link:
    """A connection shared by a run and its heartbeat thread, one statement at a time."""

    def __init__(self, settings: FleetSettings, retry_s: float = 60.0) -> None:
        self.settings = settings
        self.retry_s = retry_s
        self._lock = threading.Lock()  # the heartbeat thread and the run share it
        self._conn: Conn | None = connect(settings)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def run(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[dict[str, Any]]:
        """Run one statement (autocommit) and return its rows ([] when it returns none)."""
        retrying = Retrying(
            retry=retry_if_exception_type((psycopg.OperationalError, FleetUnavailable)),
            # 0.2 s doubling to 5 s, and no sleep that would end past `retry_s`.
            wait=wait_exponential(multiplier=0.2, max=5.0),
            stop=stop_before_delay(self.retry_s),
            before_sleep=self._retrying,
            reraise=True,
        )
        try:
            return retrying(self._once, sql, params)
        except psycopg.OperationalError as exc:
            raise unavailable(self.settings, exc) from None

    def _once(self, sql: str, params: tuple[Any, ...] | dict[str, Any]) -> list[dict[str, Any]]:
        try:
            with self._lock:
                if self._conn is None or self._conn.closed:
                    self._conn = connect(self.settings)
                cur = self._conn.execute(sql, params)
                return list(cur.fetchall()) if cur.description else []
        except (psycopg.OperationalError, FleetUnavailable):
            self._drop()
            raise

    @staticmethod
    def _retrying(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0.0
        what = describe(exc) if exc is not None else "failed"
        log.warning("fleet database: %s; retrying in %.1fs", what, delay)

    def _drop(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(psycopg.Error):  # broken already: nothing to close
                    self._conn.close()
                self._conn = None
