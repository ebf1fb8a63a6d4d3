"""Control orders: stop, cancel, pause or resume a task, whatever flow it is in.

Where orders come from, all read into `ControlOrder`:
- `worker cancel TASK [--pause|--resume]`: a file `<state>/control/<id>.json` (`OrderFile`,
  in `worker.kernel.order_file`),
  obeyed only when the CLI wrote exactly it (`worker.waits.authored`);
- the inbox: a message addressed to this machine with `"kind": "control"`, `"action":
  "stop|cancel|pause|resume"` and `"task": "<task-id>"`, or a message whose subject is exactly
  `STOP <task-id>` (or CANCEL, PAUSE, RESUME, upper case);
- the intercom: a note (`worker intercom send TASK "/pause why"`) whose first word is `/stop`,
  `/cancel`, `/pause` or `/resume` (`worker.kernel.intercom_orders`);
- hooks (`ControlHook`): GitHub comments by trusted users (`worker.kernel.github_hook`) when
  `[github] repos` is set, the fleet's orders (`worker.fleet.orders`) with a fleet database,
  and any `register_hook(factory)`.
`worker.kernel.orders.read_orders` gathers them all. An order is consumed once obeyed: its
file moves to `done/` beside it with the outcome.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from worker.config import Settings
from worker.kernel.model import ALL_TASKS, ControlOrder, Order
from worker.sources.message import Message, addressed_messages
from worker.state.fsutil import atomic_write_text, json_files, quarantine
from worker.waits import authored

if TYPE_CHECKING:
    from worker.kernel.order_file import OrderFile

log = logging.getLogger(__name__)

# Compiled at its first use (`re`'s cache): most runs read no order.
_SUBJECT = r"^(STOP|CANCEL|PAUSE|RESUME)\s+(\S+)\s*$"
_NEEDLES = (b'"control"', b'"STOP ', b'"CANCEL ', b'"PAUSE ', b'"RESUME ')
_WORDS = {f"/{order.value}": order for order in Order}


def control_dir(settings: Settings) -> Path:
    return settings.state / "control"


def write_order(
    settings: Settings, task_id: str, order: Order, reason: str = "", sender: str = ""
) -> ControlOrder:
    """Write an order for the running worker (its watcher) or the next run."""
    from worker.kernel.order_file import OrderFile

    stamp = datetime.now(UTC)
    data = OrderFile.model_validate(
        {
            "id": f"{stamp:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}",
            "action": order,
            "task": task_id,
            "reason": reason,
            "from": sender or authored.os_user(),
            "createdAt": stamp,
        }
    )
    path = control_dir(settings) / f"{data.id}.json"
    text = data.model_dump_json(by_alias=True, indent=2) + "\n"
    authored.sign(settings, text.encode("utf-8"), "control")  # before the file can be seen
    atomic_write_text(path, text)
    return _from_file(data, path)


def _from_file(data: OrderFile, path: Path) -> ControlOrder:
    return ControlOrder(
        data.id,
        data.action,
        data.task,
        "cli",
        data.reason,
        data.sender,
        data.created_at.timestamp(),
        True,
        path,
    )


def order_of_message(message: Message) -> tuple[Order, str] | None:
    """The order an inbox message carries, or None when it is an ordinary message."""
    extra = message.model_extra or {}
    if extra.get("kind") == "control":
        try:
            return Order(str(extra.get("action", "")).lower()), str(extra.get("task") or "")
        except ValueError:
            return None
    match = re.match(_SUBJECT, message.subject)
    if match:
        return Order(match.group(1).lower()), match.group(2)
    return None


def unknown_order(message: Message) -> str | None:
    """Why a message marked `"kind": "control"` carries no order worker knows (its action
    missing or unknown), or None. Such a message is set aside, never run as a task: its
    sender meant an order, and an agent paid to work on "cancle order" obeys nobody."""
    extra = message.model_extra or {}
    if extra.get("kind") != "control" or order_of_message(message) is not None:
        return None
    valid = ", ".join(order.value for order in Order)
    action = extra.get("action")
    if action is None or not str(action).strip():
        return f"a control message without an action; the valid actions are: {valid}"
    named = str(action)[:80]
    return f"a control message with the unknown action {named!r}; the valid actions are: {valid}"


def order_of_text(text: str) -> tuple[Order, str] | None:
    """`/stop`, `/cancel`, `/pause` or `/resume` as the first word of a note or a comment:
    the order and the reason after it; None for anything else (an ordinary message)."""
    words = text.strip().split(maxsplit=1)
    order = _WORDS.get(words[0].lower()) if words else None
    if order is None:
        return None
    return order, words[1].strip() if len(words) > 1 else ""


def is_control_message(message: Message) -> bool:
    """For the inbox source: a control message is not a task."""
    return order_of_message(message) is not None


def from_control_dir(settings: Settings) -> list[ControlOrder]:
    """The orders `worker cancel` wrote; any other file there is refused (`NOTE_UNSIGNED`)."""
    folder = control_dir(settings)
    orders: list[ControlOrder] = []
    files = json_files(folder)
    if not files:
        return []  # the watcher asks every second; an order file is rare
    from worker.kernel.order_file import OrderFile

    signed = authored.signed(settings)
    for path in files:
        try:
            raw = path.read_bytes()
            if authored.digest(raw) not in signed:
                log.warning("control order %s", authored.refusal(path.name))
                quarantine(path, folder / "rejected", authored.refusal(path.name))
                continue
            orders.append(_from_file(OrderFile.model_validate_json(raw), path))
        except FileNotFoundError:
            continue
        except (OSError, ValidationError) as exc:
            log.warning("control order %s is unreadable: %s", path.name, exc)
            quarantine(path, folder / "rejected", f"not a control order: {exc}")
    return orders


def from_inbox(settings: Settings, approvers: list[str]) -> list[ControlOrder]:
    """The control messages addressed to this machine in the inbox."""
    orders = []
    for entry in addressed_messages(settings.inbox, settings.machine_id):
        message, path = entry.message, entry.path
        if message is None:
            continue  # the inbox source quarantines it with its reason
        if message.to not in (settings.machine_id, "all") or message.status != "unread":
            continue
        found = order_of_message(message)
        if found is None:
            continue
        order, task_id = found
        extra = message.model_extra or {}
        origin = "intercom" if extra.get("channel") == "intercom" else "inbox"
        at = message.created_at.timestamp() if message.created_at else path.stat().st_mtime
        trusted = bool(task_id) and may_order(order, message.sender, approvers)
        orders.append(
            ControlOrder(
                message.id,
                order,
                task_id or "?",
                origin,
                str(extra.get("reason") or message.body)[:500],
                message.sender,
                at,
                trusted,
                path,
            )
        )
    return orders


def may_order(order: Order, sender: str, approvers: list[str]) -> bool:
    """May this sender of a message give this order?

    Resuming is approving: only a listed approver may. Stopping, cancelling and pausing are
    open to anyone who can write to the inbox, unless approvers are listed: then only they
    may (otherwise anyone could reject a wait, or pause a task that only an approver can
    resume)."""
    if order is Order.RESUME or approvers:
        return sender in approvers
    return True


def consume(order: ControlOrder, outcome: str) -> None:
    """The order is done: its file moves to `done/` beside it, with its outcome."""
    if isinstance(order.ref, Path):
        quarantine(order.ref, order.ref.parent / "done", f"{outcome} at {time.time():.0f}")
    elif isinstance(order.ref, tuple) and len(order.ref) == 2:
        hook, handle = order.ref
        hook.consume(handle, outcome)


class ControlHook(Protocol):
    """Orders from elsewhere (a GitHub comment by a trusted user, a chat bot...).

    `orders()` returns ControlOrders whose `trusted` the hook decided (its allow-list) and
    whose `ref` is `(hook, handle)`; `consume(handle, outcome)` marks one done (idempotent)."""

    def orders(self) -> list[ControlOrder]: ...

    def consume(self, handle: Any, outcome: str) -> None: ...


HOOKS: list[Callable[[Settings], ControlHook]] = []


def register_hook(factory: Callable[[Settings], ControlHook]) -> None:
    if factory not in HOOKS:
        HOOKS.append(factory)


def describe(order: ControlOrder) -> str:
    target = "every task" if order.task_id == ALL_TASKS else order.task_id
    return (
        f"{order.order.value} {target} (order {order.id} from {order.sender or order.origin}"
        f" via {order.origin})"
    )
