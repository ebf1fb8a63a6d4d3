"""The fleet database: one PostgreSQL shared by every machine, versioned migrations.

Leases and heartbeats are stamped with the database's `now()`, never a machine's clock, so
clock skew between machines cannot make a live lease look expired. Every error that leaves this
module names the database by its URL with the password hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from worker.errors import ExitCode, WorkerError
from worker.fleet.settings import FleetSettings, redact_url

try:
    import psycopg
    from psycopg.rows import dict_row
except ImportError:  # the `fleet` extra is not installed: a clear error when one is needed
    psycopg = None  # type: ignore[assignment]  # checked in connect()


class FleetUnavailable(WorkerError):
    """The fleet database cannot be reached: nothing was claimed; try again later."""

    exit_code = ExitCode.LOCKED  # 75, EX_TEMPFAIL


Conn = Any  # psycopg.Connection[dict[str, Any]]; Any keeps the extra optional for mypy users


def _v1(conn: Conn) -> None:
    conn.execute(
        """
        CREATE TABLE fleet_claims (
            task_id TEXT PRIMARY KEY,
            source TEXT NOT NULL,
            machine_id TEXT NOT NULL,
            run_id BIGINT,
            pid INTEGER NOT NULL,
            claimed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            lease_until TIMESTAMPTZ NOT NULL,
            state TEXT NOT NULL,
            detail JSONB NOT NULL DEFAULT '{}'
        );
        CREATE INDEX fleet_claims_live ON fleet_claims (lease_until)
            WHERE state IN ('active', 'waiting');
        CREATE TABLE fleet_runs (
            id BIGSERIAL PRIMARY KEY,
            machine_id TEXT NOT NULL,
            local_run_id BIGINT NOT NULL,
            pid INTEGER NOT NULL,
            started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            ended_at TIMESTAMPTZ,
            task_id TEXT,
            source TEXT,
            outcome TEXT,
            reason TEXT,
            fields JSONB NOT NULL DEFAULT '{}'
        );
        CREATE INDEX fleet_runs_started ON fleet_runs (started_at DESC);
        CREATE TABLE fleet_decisions (
            id BIGSERIAL PRIMARY KEY,
            run_id BIGINT REFERENCES fleet_runs(id),
            at TIMESTAMPTZ NOT NULL DEFAULT now(),
            machine_id TEXT NOT NULL,
            task_id TEXT,
            source TEXT,
            reason_codes JSONB NOT NULL DEFAULT '[]',
            fields JSONB NOT NULL DEFAULT '{}'
        );
        CREATE TABLE fleet_machines (
            machine_id TEXT NOT NULL,
            pid INTEGER NOT NULL,
            host TEXT NOT NULL,
            run_id BIGINT,
            task_id TEXT,
            first_seen TIMESTAMPTZ NOT NULL DEFAULT now(),
            last_seen TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (machine_id, host)
        );
        CREATE TABLE fleet_reports (
            machine_id TEXT PRIMARY KEY,
            report JSONB NOT NULL,
            updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        CREATE TABLE fleet_orders (
            id TEXT PRIMARY KEY,
            action TEXT NOT NULL,
            task_id TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            sender TEXT NOT NULL DEFAULT '',
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            consumed_at TIMESTAMPTZ,
            consumed_by TEXT,
            outcome TEXT
        );
        CREATE INDEX fleet_orders_open ON fleet_orders (created_at) WHERE consumed_at IS NULL;
        CREATE TABLE fleet_order_acks (
            order_id TEXT NOT NULL REFERENCES fleet_orders(id),
            machine_id TEXT NOT NULL,
            at TIMESTAMPTZ NOT NULL DEFAULT now(),
            outcome TEXT,
            PRIMARY KEY (order_id, machine_id)
        );
        """
    )


MIGRATIONS: list[Callable[[Conn], None]] = [_v1]
_LOCK_KEY = 0x776F726B  # pg_advisory_xact_lock key: one migrating machine at a time


def connect(settings: FleetSettings) -> Conn:
    """An autocommit connection to the fleet database, migrated; FleetUnavailable if not."""
    if psycopg is None:
        raise FleetUnavailable(
            "[fleet] database_url is set but psycopg is not installed: pip install 'worker[fleet]'"
        )
    try:
        conn = psycopg.connect(
            settings.database_url or "",
            autocommit=True,
            row_factory=dict_row,
            connect_timeout=settings.connect_timeout_s,
            application_name="worker",
            prepare_threshold=None,  # no server-side prepared statements: PgBouncer-safe
        )
    except psycopg.Error as exc:
        raise unavailable(settings, exc) from None  # the original may quote the URL
    try:
        migrate(conn, MIGRATIONS)
    except psycopg.Error as exc:
        conn.close()
        raise unavailable(settings, exc) from None
    return conn


def describe(exc: BaseException) -> str:
    """The first line of a driver error, any password in it hidden."""
    text = str(exc).strip()
    return redact_url(text.splitlines()[0] if text else type(exc).__name__)


def unavailable(settings: FleetSettings, exc: BaseException) -> FleetUnavailable:
    return FleetUnavailable(
        f"fleet database {settings.shown_url()} is unreachable: {describe(exc)}; "
        "nothing was claimed, the next run tries again"
    )


def migrate(conn: Conn, migrations: Sequence[Callable[[Conn], None]]) -> int:
    """Apply the migrations this database has not seen, in order; the schema version."""
    if _version(conn) >= len(migrations):
        return len(migrations)  # the usual case: one round trip, no lock
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS fleet_migrations ("
            " version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        row = conn.execute("SELECT COALESCE(MAX(version), 0) AS v FROM fleet_migrations").fetchone()
        done = int(row["v"])
        for version, step in enumerate(migrations, start=1):
            if version > done:
                step(conn)
                conn.execute("INSERT INTO fleet_migrations(version) VALUES (%s)", (version,))
    return len(migrations)


def _version(conn: Conn) -> int:
    try:
        row = conn.execute("SELECT COALESCE(MAX(version), 0) AS v FROM fleet_migrations")
    except psycopg.errors.UndefinedTable:
        return 0  # a new database
    return int(row.fetchone()["v"])
