"""Claims and leases of every source on the fleet database (the Store's ClaimBackend).

One row per task in `fleet_claims`. A claim is one `INSERT … ON CONFLICT DO UPDATE … WHERE`
statement: PostgreSQL locks the conflicting row and re-checks the condition on its latest
version, so of any number of racing machines exactly one gets the row back. Leases are
`now() + lease` of the database; rows are handed back in this machine's clock (the lease's
remaining seconds added to `time.time()`), so callers comparing with `time.time()` stay right
however far this machine's clock is from the others'.
"""

from __future__ import annotations

import json
import time
from typing import Any

from worker.fleet.link import Link

_COLUMNS = (
    "task_id, source, machine_id, run_id, pid, state, detail,"
    " EXTRACT(EPOCH FROM lease_until - now())::float8 AS lease_left,"
    " EXTRACT(EPOCH FROM now() - claimed_at)::float8 AS age"
)
_CLAIM = """
INSERT INTO fleet_claims AS c (task_id, source, machine_id, run_id, pid, lease_until, state, detail)
VALUES (%(task)s, %(source)s, %(machine)s, %(run)s, %(pid)s,
        now() + make_interval(secs => %(lease)s), 'active', %(detail)s)
ON CONFLICT (task_id) DO UPDATE SET
    source = excluded.source, machine_id = excluded.machine_id, run_id = excluded.run_id,
    pid = excluded.pid, claimed_at = now(), lease_until = excluded.lease_until,
    state = 'active', detail = excluded.detail
WHERE c.state <> 'active' OR c.lease_until <= now()
   OR (c.machine_id = excluded.machine_id AND c.pid = excluded.pid
       AND c.run_id IS NOT DISTINCT FROM excluded.run_id)
RETURNING task_id
"""


class PgClaims:
    """The ClaimBackend of a fleet run: the same operations as the SQLite store's claims."""

    def __init__(self, link: Link, machine_id: str, pid: int) -> None:
        self.link = link
        self.machine_id = machine_id
        self.pid = pid

    def claim(
        self, task_id: str, source: str, machine_id: str, pid: int, lease_s: float, **detail: Any
    ) -> bool:
        """Take the lease unless another run's is live; a repeat by the same run (after a
        lost connection) finds its own claim and succeeds."""
        rows = self.link.run(
            _CLAIM,
            {
                "task": task_id,
                "source": source,
                "machine": machine_id,
                "run": detail.get("run_id"),
                "pid": pid,
                "lease": float(lease_s),
                "detail": json.dumps(detail, default=str),
            },
        )
        return bool(rows)

    def renew_claim(self, task_id: str, lease_s: float) -> None:
        self.link.run(
            "UPDATE fleet_claims SET lease_until = now() + make_interval(secs => %s)"
            " WHERE task_id = %s AND state = 'active' AND machine_id = %s AND pid = %s",
            (float(lease_s), task_id, self.machine_id, self.pid),
        )

    def renew_all(self, lease_s: float) -> int:
        """Extend every live lease this process holds (the heartbeat); how many."""
        rows = self.link.run(
            "UPDATE fleet_claims SET lease_until = now() + make_interval(secs => %s)"
            " WHERE state = 'active' AND machine_id = %s AND pid = %s AND lease_until > now()"
            " RETURNING task_id",
            (float(lease_s), self.machine_id, self.pid),
        )
        return len(rows)

    def release_claim(self, task_id: str, state: str) -> None:
        """End the lease, unless another run holds it now (ours expired and was taken)."""
        self.link.run(
            "UPDATE fleet_claims SET state = %s, lease_until = now() WHERE task_id = %s"
            " AND (state <> 'active' OR lease_until <= now() OR (machine_id = %s AND pid = %s))",
            (state, task_id, self.machine_id, self.pid),
        )

    def expire_claim(self, task_id: str) -> bool:
        """Mark an expired lease `expired`; False when it is live or another run did it."""
        rows = self.link.run(
            "UPDATE fleet_claims SET state = 'expired' WHERE task_id = %s"
            " AND state = 'active' AND lease_until <= now() RETURNING task_id",
            (task_id,),
        )
        return bool(rows)

    def note_agent(self, task_id: str, pid: int, started: str | None) -> None:
        self.link.run(
            "UPDATE fleet_claims SET detail = detail || %s::jsonb WHERE task_id = %s",
            (json.dumps({"agent_pgid": pid, "agent_started": started}), task_id),
        )

    def active_claims(self) -> list[dict[str, Any]]:
        return self._rows("state = 'active'")

    def claim_of(self, task_id: str) -> dict[str, Any] | None:
        rows = self._rows("task_id = %s", (task_id,))
        return rows[0] if rows else None

    def expired_claims(self, now: float | None = None) -> list[dict[str, Any]]:
        """Leases past their end by the database's clock (`now` is ignored: machines' clocks
        may disagree, the database's is the one every lease was stamped with)."""
        return self._rows("state = 'active' AND lease_until <= now()")

    def _rows(self, where: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        rows = self.link.run(f"SELECT {_COLUMNS} FROM fleet_claims WHERE {where}", params)
        return [_local(row) for row in rows]


def _local(row: dict[str, Any]) -> dict[str, Any]:
    """A row shaped like the SQLite store's, its times in this machine's clock."""
    now = time.time()
    lease_left, age = row.pop("lease_left"), row.pop("age")
    row["lease_until"] = now + lease_left
    row["claimed_at"] = now - age
    row["detail"] = json.dumps(row["detail"])
    return row
