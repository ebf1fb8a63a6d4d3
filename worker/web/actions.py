"""The dashboard's actions, each through the service its command uses: Approve and Reject as
`worker waits approve|reject` (the wait's allow-list applies), Cancel as `worker cancel` (an
order, refused for a task not known here). The actor is recorded as `web:<name>`."""

from __future__ import annotations

from typing import Any

from worker.config import Settings
from worker.errors import UsageError
from worker.fleet.link import Link
from worker.fleet.orders import FleetOrders
from worker.fleet.view import waiting_on
from worker.kernel.control import write_order
from worker.kernel.model import Order
from worker.state.known_tasks import require_known
from worker.waits.intercom import Kind
from worker.waits.service import WaitNotFound
from worker.waits.service import note as write_note

_NOTE_CAP = 4000  # characters: a note is handed to the agent


class UnknownTask(UsageError):
    """No such wait or task here: the action is refused and nothing is written."""


def decide(settings: Settings, task: str, approve: bool, note: str, actor: str) -> dict[str, Any]:
    """Approve or reject a waiting task; UsageError for an unknown id or a refused approver."""
    kind: Kind = "approval" if approve else "rejection"
    if len(note) > _NOTE_CAP:
        raise UsageError(f"the note is {len(note)} characters long; at most {_NOTE_CAP}")
    try:
        return write_note(settings, task, kind, note, actor)
    except WaitNotFound as exc:
        raise UnknownTask(_elsewhere(settings, exc) or str(exc)) from exc


def _elsewhere(settings: Settings, exc: WaitNotFound) -> str | None:
    """On a fleet, where the wait is (only that machine can answer it), as the CLI says."""
    if not settings.fleet.enabled:
        return None
    machine = waiting_on(settings, exc.ident)
    if machine is None or machine == settings.machine_id:
        return None
    return (
        f"{exc.ident} waits on machine {machine}, not on this one ({settings.machine_id}):"
        " approve it on that machine's dashboard"
    )


def cancel(settings: Settings, task: str, reason: str, actor: str) -> dict[str, Any]:
    """An order to cancel the task, as `worker cancel` writes it, sent in the actor's name."""
    if task == "*" or not task.strip():
        raise UsageError("name one task to cancel")
    why = reason.strip() or f"cancelled by {actor}"
    if settings.fleet.enabled:
        _known_in_fleet(settings, task)
        order_id = FleetOrders(settings).write(task, Order.CANCEL, why, actor)
        return {"order": order_id, "task": task, "reason": why, "by": actor}
    _known(settings, task)
    written = write_order(settings, task, Order.CANCEL, why, sender=actor)
    return {"order": written.id, "task": task, "reason": why, "by": actor}


def _known(settings: Settings, task: str) -> None:
    try:
        require_known(settings, task)
    except UsageError as exc:
        raise UnknownTask(str(exc).split("; add --force")[0]) from exc


def _known_in_fleet(settings: Settings, task: str) -> None:
    link = Link(settings.fleet, retry_s=5.0)
    try:
        rows = link.run(
            "SELECT 1 FROM fleet_claims WHERE task_id = %s"
            " UNION ALL SELECT 1 FROM fleet_runs WHERE task_id = %s LIMIT 1",
            (task, task),
        )
    finally:
        link.close()
    if not rows:
        _known(settings, task)  # a task only this machine has seen (its inbox)
