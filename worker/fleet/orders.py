"""`worker cancel` across the fleet: orders in `fleet_orders`, read by every machine's control
poll (a ControlHook), consumed by the machine that obeys them.

An order for a task that no machine has is left for the task to show up, and consumed as
expired after the kernel's control TTL, as the other order channels are. An order for every
task (`*`) is for every machine: each machine acknowledges it for itself.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from worker.config import Settings
from worker.fleet.link import Link
from worker.fleet.session import current_link
from worker.kernel.model import ALL_TASKS, ControlOrder, Order

ORIGIN = "fleet"


class FleetOrders:
    """The ControlHook of the fleet database (orders written with its credentials are trusted:
    whoever can write there can claim any task anyway)."""

    def __init__(self, settings: Settings, link: Link | None = None) -> None:
        self.settings = settings
        self.link = link or current_link()  # the run's connection, when in a run

    def _run(self, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
        if self.link is not None:
            return self.link.run(sql, params)
        link = Link(self.settings.fleet, retry_s=5.0)
        try:
            return link.run(sql, params)
        finally:
            link.close()

    def orders(self) -> list[ControlOrder]:
        if not self.settings.fleet.enabled:
            return []  # registered by a fleet run of this process; these settings have none
        rows = self._run(
            "SELECT id, action, task_id, reason, sender,"
            " EXTRACT(EPOCH FROM created_at)::float8 AS at"
            " FROM fleet_orders o WHERE consumed_at IS NULL AND NOT EXISTS (SELECT 1"
            "  FROM fleet_order_acks a WHERE a.order_id = o.id AND a.machine_id = %s)"
            " ORDER BY created_at, id",
            (self.settings.machine_id,),
        )
        found = []
        for row in rows:
            try:
                order = Order(row["action"])
            except ValueError:
                continue  # not one of ours: a newer worker's order, left for it
            found.append(
                ControlOrder(
                    row["id"],
                    order,
                    row["task_id"],
                    ORIGIN,
                    row["reason"],
                    row["sender"],
                    row["at"],
                    True,
                    (self, (row["id"], row["task_id"])),
                )
            )
        return found

    def consume(self, handle: Any, outcome: str) -> None:
        order_id, task_id = handle
        if task_id == ALL_TASKS:
            self._run(
                "INSERT INTO fleet_order_acks(order_id, machine_id, outcome) VALUES (%s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                (order_id, self.settings.machine_id, outcome[:1000]),
            )
            return
        self._run(
            "UPDATE fleet_orders SET consumed_at = now(), consumed_by = %s, outcome = %s"
            " WHERE id = %s AND consumed_at IS NULL",
            (self.settings.machine_id, outcome[:1000], order_id),
        )

    def write(self, task_id: str, order: Order, reason: str, sender: str) -> str:
        order_id = f"fleet-{uuid.uuid4().hex[:12]}"
        self._run(
            "INSERT INTO fleet_orders(id, action, task_id, reason, sender)"
            " VALUES (%s, %s, %s, %s, %s)",
            (order_id, order.value, task_id, reason, sender or os.environ.get("USER", "cli")),
        )
        return order_id


def send_order(settings: Settings, task_id: str, order: Order, reason: str = "") -> str:
    """Write an order every machine's control poll reads (`worker cancel` with a fleet)."""
    return FleetOrders(settings).write(task_id, order, reason, "")
