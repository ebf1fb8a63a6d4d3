"""Carrying out a decision's actions (I/O). Each action is applied on its own: one that fails
is recorded with its error and the others go on. The task's source is told of every task an
order ended (`source.report(task, TaskResult(task, Outcome.CANCELLED, ...))`).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worker.config import Settings
from worker.kernel import control, db, staleness
from worker.kernel.model import Act, Action, ControlOrder, Decision, Reason, ReplySignal, StaleItem
from worker.models import Outcome, Task
from worker.process.platform.names import portable_name
from worker.sandbox.cli_home import remove as remove_cli_folder
from worker.sources.base import TaskSource
from worker.sources.message import Message, outbox
from worker.state.fsutil import atomic_write_text, quarantine
from worker.state.store import Store
from worker.waits import record
from worker.waits.phase0 import task_of

if TYPE_CHECKING:
    from worker.results import TaskResult
    from worker.waits.state import WaitState

log = logging.getLogger(__name__)


def apply(
    settings: Settings,
    store: Store,
    sources: dict[str, TaskSource],
    decision: Decision,
    orders: tuple[ControlOrder, ...],
    run_id: int,
) -> list[dict[str, Any]]:
    """Apply every action but those on a running task (the stop watcher's); return what each
    did, for the decision event."""
    by_id = {order.id: order for order in orders}
    done = []
    for action in decision.actions:
        if action.act in (Act.STOP_RUNNING, Act.PAUSE_RUNNING):
            continue
        try:
            outcome = _apply(settings, store, sources, action, by_id, run_id)
            ok = True
        except Exception as exc:  # one failed action must not stop the others
            log.warning("kernel: %s %s failed: %s", action.act.value, action.task_id, exc)
            outcome, ok = f"{type(exc).__name__}: {exc}", False
        done.append({"act": action.act.value, "task": action.task_id, "ok": ok, "outcome": outcome})
    return done


def _apply(
    settings: Settings,
    store: Store,
    sources: dict[str, TaskSource],
    action: Action,
    orders: dict[str, ControlOrder],
    run_id: int,
) -> str:
    act = action.act
    if act is Act.CANCEL_WAIT:
        return cancel_wait(settings, store, sources, action)
    if act is Act.DROP_QUEUED:
        return drop_queued(sources, action, run_id)
    if act is Act.PAUSE:
        db.pause(store, action.task_id, action.order_id, action.detail)
        return "paused"
    if act is Act.RESUME:
        db.resume(store, action.task_id)
        return "resumed"
    if act is Act.CONSUME_ORDER:
        order = orders.get(action.order_id or "")
        if order is not None:
            control.consume(order, f"{action.reason}: {action.detail}")
        return "consumed"
    if act in (Act.CLEAN, Act.KEEP_WORK):
        item: StaleItem = action.ref
        if item.kind == "worktree":
            return staleness.clean_worktree(settings, item.ref)
        return staleness.clean_claim(store, item.id)
    if act in (Act.NOTE_REPLY, Act.CLARIFY):
        reply: ReplySignal = action.ref
        if act is Act.CLARIFY:
            ask_clarification(settings, reply)
        db.record_reply(
            store, reply.reply_id, reply.task_id, reply.signal, reply.confidence, act.value
        )
        return "asked" if act is Act.CLARIFY else "noted"
    return "nothing to do"


def cancelled(task: Task, action: Action) -> TaskResult:
    from worker.results import TaskResult  # only when an order cancels a task

    return TaskResult(
        task,
        Outcome.CANCELLED,
        f"cancelled: {action.detail}",
        [Reason.SAFETY_OVERRIDE, action.reason],
    )


def cancel_wait(
    settings: Settings, store: Store, sources: dict[str, TaskSource], action: Action
) -> str:
    """Move the wait state aside (`<wait_states>/cancelled/`), release its claim, tell the
    task's source. The file is kept: it holds the session to come back to."""
    path: Path = action.ref
    state = record.recorded_state(settings, path, store)
    if state.resume_when == "pull_request" and settings.github.repos:
        ended = _pull_request_ended(settings, store, sources, path, state)
        if ended:
            return ended
    task = task_of(state)
    quarantine(path, settings.wait_states / "cancelled", f"{action.reason}: {action.detail}")
    record.forget(settings, path, store)
    remove_cli_folder(settings.state, task.id)  # ended for good: no session to resume
    if store.claim_of(task.id) is not None:
        store.release_claim(task.id, Outcome.CANCELLED.value)
    source = sources.get(task.source)
    if source is not None:
        task = source.find(task.id) or task  # the source's own view (its sender, its thread)
        source.report(task, cancelled(task, action))
    return "wait state moved to cancelled/; source told" if source else "wait state moved"


def _pull_request_ended(
    settings: Settings,
    store: Store,
    sources: dict[str, TaskSource],
    path: Path,
    state: WaitState,
) -> str:
    """A task cancelled after its pull request was merged (or closed) by a person ends as
    that, never as cancelled (a merged issue is no failure); "" while it is open."""
    from worker.waits.expiry import end_wait
    from worker.waits.github_pr_cancel import ended_already
    from worker.waits.ledger import WaitCode

    end = ended_already(settings, store, path, state).end
    if end is None:
        return ""
    outcome, reason = Outcome(end[0]), f"{end[1]} before the cancel order"
    if end_wait(settings, store, path, state, outcome, reason, WaitCode.PR_ENDED, sources):
        return f"its pull request had ended: {reason}; recorded as {outcome.value}"
    return ""


def drop_queued(sources: dict[str, TaskSource], action: Action, run_id: int) -> str:
    """Take the task off its queue (claim, report cancelled, release as done)."""
    task: Task = action.ref
    source = sources.get(task.source)
    if source is None:
        return f"no source {task.source!r}; nothing dropped"
    if not source.claim(task, run_id):
        return "another run holds it; not dropped"
    result = cancelled(task, action)
    try:
        source.report(task, result)
    finally:
        source.release(task, result)
    return "dropped; source told"


def ask_clarification(settings: Settings, reply: ReplySignal) -> None:
    """Ask the sender, on the task's channel (an inbox reply), what they meant."""
    if not reply.sender:
        return
    message = Message.model_validate(
        {
            "id": f"{reply.reply_id}-clarify",
            "from": settings.machine_id,
            "to": reply.sender,
            "subject": f"[question] {reply.task_id}: stop, pause, resume or leave it?",
            "body": (
                f"I read your reply {reply.reply_id} as {reply.signal} but I am not sure enough "
                f"({reply.confidence:.2f}). Please answer with one word: STOP (cancel the task), "
                "PAUSE, or RESUME (go on); or write a message with subject "
                f"`CANCEL {reply.task_id}`."
            ),
            "status": "unread",
            "created_at": datetime.now(UTC),
            "in_reply_to": reply.task_id,
            "thread_id": reply.task_id,
        }
    )
    atomic_write_text(outbox(settings.inbox) / f"{portable_name(message.id)}.json", message.dump())
