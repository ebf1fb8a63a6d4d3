"""Reading the world into the kernel's part of a snapshot (I/O, no deciding).

Each flow's source of truth stays where it is: orders in their files, wait states in theirs,
pause marks and replies already read in the kernel's tables, claims in SQLite.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from worker.config import Settings
from worker.kernel import control, db, staleness
from worker.kernel.model import Order, ReplySignal, Snapshot, StaleItem, WaitingFlow
from worker.kernel.orders import read_orders
from worker.sources.message import addressed_messages
from worker.state.store import Store
from worker.waits.phase0 import task_of, trusted_waits

if TYPE_CHECKING:
    from worker.kernel.replies import ReplyClassifier

log = logging.getLogger(__name__)


def observe(
    settings: Settings,
    store: Store | None,
    snap: Snapshot,
    *,
    dry_run: bool = False,
    classifier: ReplyClassifier | None = None,
) -> Snapshot:
    """The snapshot with the kernel's observations added: orders, paused flows, pause marks,
    stale leftovers (not in a dry run) and the replies not read yet."""
    now = time.time()
    ready = {w.task.id for w in snap.ready_waits}
    waiting = tuple(waiting_flows(settings, skip=ready))
    paused: frozenset[str] = frozenset()
    stale: tuple[StaleItem, ...] = ()
    signals: tuple[ReplySignal, ...] = ()
    if store is not None:
        paused = db.paused_ids(store)
        if not dry_run:
            stale = tuple(staleness.find(settings, store, now))
        read = db.replies_read(store)
        ids = ready | {w.task.id for w in waiting}
        signals = tuple(
            s for s in reply_signals(settings, ids, classifier) if s.reply_id not in read
        )
    return dataclasses.replace(
        snap,
        controls=tuple(read_orders(settings, dry_run=dry_run)),
        waiting=waiting,
        paused=paused,
        stale=stale,
        signals=signals,
        now=now,
    )


def waiting_flows(settings: Settings, skip: set[str]) -> list[WaitingFlow]:
    flows = []
    # Only the waits worker recorded; phase 0 sets the other files aside with their reason.
    for path, state in trusted_waits(settings):
        if state.task_id in skip:
            continue
        last = state.last_active_at or state.timestamp
        flows.append(WaitingFlow(task_of(state), state.resume_brief, _epoch(last), path))
    return flows


def reply_signals(
    settings: Settings, task_ids: set[str], classifier: ReplyClassifier | None = None
) -> list[ReplySignal]:
    """Replies in the inbox to a waiting task, from someone else than this machine."""
    if not task_ids or not settings.inbox.is_dir():
        return []
    replies = []
    for entry in addressed_messages(settings.inbox, settings.machine_id):
        message = entry.message
        if message is None or not message.in_reply_to:
            continue
        if message.in_reply_to not in task_ids or message.sender == settings.machine_id:
            continue
        if message.to not in (settings.machine_id, "all"):
            continue
        if message.body.strip().lower().startswith(("/approve", "/reject")):
            continue  # an approval: the wait-state owner's (user_approval)
        replies.append(message)
    if not replies:
        return []
    from worker.kernel.replies import interpret  # only with a reply to read (most runs: none)

    approvers = settings.waits.approvers
    return [
        interpret(
            message.id,
            message.in_reply_to or "",
            message.body or message.subject,
            message.sender,
            control.may_order(Order.RESUME, message.sender, approvers),
            classifier,
            control.may_order(Order.STOP, message.sender, approvers),
        )
        for message in replies
    ]


def _epoch(at: datetime) -> float:
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()
