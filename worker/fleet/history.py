"""Runs, decisions, heartbeats and status reports of every machine, in the fleet database.

The SQLite store stays each machine's own record; this is the copy every machine can read
(`worker fleet`, `worker log --fleet`, `worker status --fleet`). `fleet_machines` has one
row per machine id and host: when it was last heard of (`now()` of the database: its runs
and heartbeats) and what it last ran.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from worker.fleet.link import Link

_RUN_COLUMNS = ("task_id", "source", "outcome", "reason")
_PRESENCE = (
    "INSERT INTO fleet_machines(machine_id, host, pid, run_id, task_id)"
    " VALUES (%s, %s, %s, {run}, %s) ON CONFLICT (machine_id, host) DO UPDATE"
    " SET pid = excluded.pid, run_id = excluded.run_id, task_id = excluded.task_id,"
    " last_seen = now()"
)


class PgHistory:
    """The Store's RunHistory for a fleet run (one process, one or more local runs)."""

    def __init__(self, link: Link, machine_id: str, pid: int) -> None:
        self.link = link
        self.machine_id = machine_id
        self.pid = pid
        self.host = socket.gethostname()
        self._fleet_ids: dict[int, int] = {}  # local run id -> fleet_runs.id

    def run_started(self, run_id: int, machine_id: str, pid: int) -> None:
        rows = self.link.run(
            "WITH run AS (INSERT INTO fleet_runs(machine_id, local_run_id, pid)"
            " VALUES (%s, %s, %s) RETURNING id)"
            f" {_PRESENCE.format(run='(SELECT id FROM run)')} RETURNING run_id",
            (machine_id, run_id, pid, self.machine_id, self.host, self.pid, None),
        )
        self._fleet_ids[run_id] = int(rows[0]["run_id"])

    def run_finished(self, run_id: int, fields: dict[str, Any]) -> None:
        fleet_id = self._fleet_ids.get(run_id)
        if fleet_id is None:
            return
        known = {key: fields.get(key) for key in _RUN_COLUMNS}
        rest = {key: value for key, value in fields.items() if key not in _RUN_COLUMNS}
        self.link.run(
            "WITH run AS (UPDATE fleet_runs SET ended_at = now(),"
            " task_id = COALESCE(%s, task_id), source = COALESCE(%s, source), outcome = %s,"
            " reason = %s, fields = %s WHERE id = %s RETURNING id)"
            " UPDATE fleet_machines SET last_seen = now() FROM run"
            " WHERE machine_id = %s AND host = %s",
            (*known.values(), json.dumps(rest, default=str), fleet_id, self.machine_id, self.host),
        )

    def others_spent_today(self, machine_id: str) -> float:
        """What the other machines' runs spent since 00:00 UTC (the database's clock), for a
        fleet-wide daily cap; this machine's own spend is in its SQLite store."""
        rows = self.link.run(
            "SELECT COALESCE(SUM((fields->>'cost_usd')::float8), 0) AS usd FROM fleet_runs"
            " WHERE machine_id <> %s AND fields ? 'cost_usd'"
            " AND started_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'",
            (machine_id,),
        )
        return float(rows[0]["usd"]) if rows else 0.0

    def decision(self, run_id: int | None, fields: dict[str, Any]) -> None:
        fleet_id = self._fleet_ids.get(run_id) if run_id is not None else None
        self.link.run(
            "INSERT INTO fleet_decisions(run_id, machine_id, task_id, source, reason_codes,"
            " fields) VALUES (%s, %s, %s, %s, %s, %s)",
            (
                fleet_id,
                self.machine_id,
                fields.get("task_id"),
                fields.get("source"),
                json.dumps(fields.get("reason_codes", [])),
                json.dumps({k: v for k, v in fields.items() if k != "detail"}, default=str),
            ),
        )
        if fleet_id is not None and fields.get("task_id"):
            self.link.run(
                "UPDATE fleet_runs SET task_id = %s, source = %s WHERE id = %s",
                (fields["task_id"], fields.get("source"), fleet_id),
            )
            self._presence(fleet_id, fields["task_id"])

    def beat(self) -> None:
        """This process is alive (the database's clock)."""
        self.link.run(
            "UPDATE fleet_machines SET last_seen = now() WHERE machine_id = %s AND host = %s",
            (self.machine_id, self.host),
        )

    def publish_report(self, path: Path) -> None:
        """Copy this machine's status report (the supervisor's file) into the database."""
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return  # none yet, or being replaced: the next beat sends it
        self.link.run(
            "INSERT INTO fleet_reports(machine_id, report) VALUES (%s, %s)"
            " ON CONFLICT (machine_id) DO UPDATE SET report = excluded.report,"
            " updated_at = now()",
            (self.machine_id, json.dumps(report)),
        )

    def _presence(self, fleet_run_id: int | None, task_id: str | None) -> None:
        self.link.run(
            _PRESENCE.format(run="%s"),
            (self.machine_id, self.host, self.pid, fleet_run_id, task_id),
        )
