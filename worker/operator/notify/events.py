"""What is worth telling someone about a task, queued in the outbox and sent at once (or on a
later run): it needs approval (with its question), failed, is done, or met the daily spend
cap. Nothing here ever raises into a task: a failure is logged. (A crash loop is told by
`worker.daemon.supervise_watch`, which must not load the data plane.)"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from worker.config import Settings
from worker.errors import MalformedInput
from worker.models import Outcome
from worker.operator.notify import moments, outbox
from worker.operator.notify.settings import telegram_configured
from worker.run.costs import DAILY_BUDGET_REACHED
from worker.sources.fallback import SETUP_PROBLEM, SETUP_PROBLEM_KNOWN
from worker.state.store import Store
from worker.waits.state import load_wait_state

if TYPE_CHECKING:
    from worker.results import TaskResult

log = logging.getLogger(__name__)


def after_task(settings: Settings, store: Store, result: TaskResult, run_id: int) -> None:
    """Queue the task's notification, if its outcome is one, and send what is pending."""
    if not outbox.channels(settings):
        return
    try:
        moments.opened(settings, store, result)
        _queue_outcome(settings, store, result, run_id)
        outbox.flush(settings, store)
    except Exception:
        log.warning(
            "notify: after %s failed (the task is not affected)", result.task.id, exc_info=True
        )


def on_run_start(settings: Settings, store: Store) -> None:
    """At the start of a run: obey Telegram's commands (unless `serve` polls already), and
    retry the notifications earlier runs could not send."""
    if not outbox.channels(settings) and not telegram_configured(settings.notify):
        return
    # Here, not at the top: the bot's commands reach the kernel's orders, the waits and the
    # status summary, which a run with no channel configured never needs.
    from worker.operator.notify import telegram

    try:
        if not telegram.polling.is_set():
            telegram.poll(settings, store)
    except Exception as exc:
        log.warning("notify: Telegram commands not read: %s", exc)
    try:
        outbox.flush(settings, store)
    except Exception:
        log.warning("notify: pending notifications not sent", exc_info=True)


def _queue_outcome(settings: Settings, store: Store, result: TaskResult, run_id: int) -> None:
    task = result.task
    name = f"{task.id} ({task.title[:80]})"
    where = f"on {settings.machine_id}, run {run_id}"
    pull = result.pull_request or {}
    link = pull.get("url") or task.ref.get("url")  # the pull request, else the issue
    if link:
        where = f"{link}\n{where}"
    if SETUP_PROBLEM in result.reason_codes:
        if SETUP_PROBLEM_KNOWN not in result.reason_codes:  # told once, not at every try
            outbox.enqueue(
                settings,
                store,
                "failed",
                f"setup_problem:{task.id}:{run_id}",
                f"worker on {settings.machine_id}: the maintenance checks cannot run",
                f"{result.reason}\n{where}",
                task.id,
            )
        return
    if result.outcome is Outcome.FAILURE:
        codes = ", ".join(dict.fromkeys(result.reason_codes))
        outbox.enqueue(
            settings,
            store,
            "failed",
            f"failed:{task.id}:{run_id}",
            f"worker: {name} failed",
            f"{result.reason}\n{codes}\n{where}",
            task.id,
        )
    elif result.outcome is Outcome.SUCCESS:
        outbox.enqueue(
            settings,
            store,
            "done",
            f"done:{task.id}:{run_id}",
            f"worker: {name} is done",
            f"{result.reason}\n{where}",
            task.id,
        )
    elif result.outcome is Outcome.WAITING and DAILY_BUDGET_REACHED in result.reason_codes:
        day = datetime.now(UTC).strftime("%Y-%m-%d")
        cap = settings.daily_cost_cap_usd or 0.0
        outbox.enqueue(
            settings,
            store,
            "daily_budget",
            f"daily_budget:{settings.machine_id}:{day}",
            f"worker on {settings.machine_id}: the daily spend cap (${cap:.2f}) is reached",
            f"New work waits until 00:00 UTC; {name} is waiting.\n`worker costs` shows the spend.",
            task.id,
        )
    elif result.outcome is Outcome.WAITING and result.wait_state is not None:
        try:
            state = load_wait_state(result.wait_state)
        except MalformedInput:
            return
        held = state.resume_when == "pull_request" and state.source_ref.get("prHeld")
        if state.resume_when != "user_approval" and not held:  # held: past max_follow_ups
            return
        outbox.enqueue(
            settings,
            store,
            "needs_approval",
            f"needs_approval:{task.id}:{state.since.isoformat()}",
            f"worker: {name} needs approval",
            f"{_why_asked(state.reason, state.wait_for, result.reason)}\n"
            f"Reply /approve {task.id} [note] or /reject {task.id} [note]\n{where}",
            task.id,
        )


def _why_asked(reason: str, wait_for: str, fallback: str) -> str:
    """Why the task asks a person, then what it waits for: "needs approval" alone, or a
    bare "pull request #4", tells nobody what to decide."""
    said = [part.strip() for part in (reason, wait_for) if part.strip()]
    if len(said) == 2 and said[1] in said[0]:
        said = said[:1]
    return "\n".join(said) or fallback
