"""`worker why`: a decision event (and its run) told in words. Pure: dicts in, lines out."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from worker.kernel.model import Reason

WORDS: dict[str, str] = {
    Reason.TASK_ID_REQUESTED: "the task was asked for with --task-id",
    Reason.WAIT_STATE_RESUMED: "a wait state's condition was met, so its task was resumed",
    Reason.INBOX_TASK_SELECTED: "an inbox message was the first task in the queue",
    Reason.GITHUB_TASK_SELECTED: "a GitHub issue was the first task in the queue",
    Reason.FALLBACK_MAINTENANCE: "nothing else was present, so the maintenance task ran",
    Reason.NOTHING_TO_DO: "there was nothing to do",
    Reason.CLAIM_LOST: "another run took a candidate first; the next one was tried",
    Reason.SOURCE_ERROR: "a source could not be read; the others were used",
    Reason.LEASE_EXPIRED: "a dead run's claim had expired and its task came back",
    Reason.ORPHAN_AGENT_ENDED: "a dead run had left its agent running; that agent was ended",
    Reason.WAITS_PENDING: "some tasks are waiting, but none of their conditions is met",
    Reason.PR_ENDED: "a waiting task's pull request was merged or closed, which ended the task",
    Reason.SAFETY_OVERRIDE: "a control order preempted the usual order of work",
    Reason.HARD_BLOCKER_ACTIVE: "a hard blocker held the turn (a running task or a ready "
    "wait state comes before any new task)",
    Reason.FOREGROUND_TASK: "it is a foreground task (inbox, --task-id): first after the "
    "hard blockers",
    Reason.PENDING_NUDGE: "it is a pending obligation (GitHub), served because no foreground "
    "task was present",
    Reason.OPPORTUNISTIC_TASK: "it is opportunistic work, done only when nothing else is there",
    Reason.CANCELLED_ON_STOP: "a stop or cancel order ended the task",
    Reason.RESUME_PREVIOUS_FLOW: "a paused flow came back to the foreground",
    Reason.STALE_CLEANUP: "leftovers of dead runs were cleaned (work is committed or kept)",
    Reason.WAIT_CANCELLED: "a waiting task was cancelled by an order",
    Reason.QUEUED_DROPPED: "a queued task was dropped by an order",
    Reason.PAUSED_ON_ORDER: "a task was paused by an order",
    Reason.RESUMED_ON_ORDER: "a paused task was resumed by an order",
    Reason.TASK_PAUSED: "a paused task was passed over",
    Reason.HALTED: "an order for every task holds new work back",
    Reason.CONTROL_NOT_TASK: "a control message in the inbox was not taken as a task",
    Reason.CONTROL_EXPIRED: "an order whose task never showed up was dropped",
    Reason.CONTROL_UNTRUSTED: "an order from someone not allowed to give it was refused",
    Reason.REPLY_INTERPRETED: "a reply to a waiting task was read",
    Reason.CLARIFICATION_ASKED: "a reply was unclear, so its sender was asked what they meant",
}
_ACTS = {
    "stop_running": "stopped the running task {task}",
    "pause_running": "paused the running task {task}",
    "cancel_wait": "cancelled the wait state of {task}",
    "drop_queued": "dropped the queued task {task}",
    "pause": "paused {task}",
    "resume": "resumed {task}",
    "consume_order": "consumed the order for {task}",
    "clean": "cleaned {task}",
    "keep_work": "kept the work of {task} (committed to its branch or left in place)",
    "clarify": "asked the sender of a reply about {task} what they meant",
    "note_reply": "read a reply about {task}",
}


def explain(event: dict[str, Any], run: dict[str, Any] | None = None) -> list[str]:
    """Sentences, most important first."""
    lines = [_headline(event, run)]
    codes = list(event.get("reason_codes") or [])
    lines += [f"- {WORDS.get(code, code.lower().replace('_', ' '))} ({code})" for code in codes]
    kernel = (event.get("detail") or {}).get("kernel") or {}
    for action in kernel.get("actions", []):
        text = _ACTS.get(action["act"], action["act"]).format(task=action["task"])
        why = f": {action['detail']}" if action.get("detail") else ""
        lines.append(f"- it {text}{why} ({action['reason']})")
    seen = (event.get("detail") or {}).get("seen") or []
    lines += [f"- it looked at {line}" for line in seen]
    cands = event.get("candidates") or {}
    if cands:
        lines.append("Candidates seen: " + ", ".join(f"{k} {v}" for k, v in cands.items()) + ".")
    if isinstance(kernel.get("paused"), int) or isinstance(kernel.get("queued"), int):
        # An idle decision stores counts (worker.state.retention.decision_detail).
        lines.append(f"Paused: {kernel.get('paused', 0)}; queued: {kernel.get('queued', 0)}.")
    elif kernel.get("paused"):
        lines.append(
            "Paused: "
            + "; ".join(f"{e['task']} ({e['resume_brief']})" for e in kernel["paused"][:10])
            + "."
        )
    if kernel.get("queued") and not isinstance(kernel["queued"], int):
        lines.append(
            "Queued after it: "
            + ", ".join(e["task"] for e in kernel["queued"][:10])
            + ("..." if len(kernel["queued"]) > 10 else "")
            + "."
        )
    if kernel.get("signals"):
        lines.append("Signals: " + ", ".join(kernel["signals"]) + ".")
    if event.get("error"):
        lines.append(f"The decision failed: {event['error']}")
    if run is not None and run.get("outcome") and run.get("task_id"):
        after = [c for c in dict.fromkeys(run.get("reason_codes") or []) if c not in codes]
        lines.append(
            f"The run ended {run['outcome']}"
            + (f": {run['reason']}" if run.get("reason") else "")
            + (f" ({', '.join(after)})" if after else "")
            + "."
        )
    return lines


def _headline(event: dict[str, Any], run: dict[str, Any] | None) -> str:
    when = datetime.fromtimestamp(event["at"], UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    who = f"Run {event.get('run_id')} on {event.get('machine_id')} at {when}"
    kernel = (event.get("detail") or {}).get("kernel") or {}
    klass = f", a {kernel['priority'].replace('_', ' ')} flow" if kernel.get("priority") else ""
    if event.get("task_id"):
        mode = f" in mode {event['mode']}" if event.get("mode") else ""
        return f"{who} took {event['task_id']} from {event.get('source')}{mode}{klass}, because:"
    return f"{who} started no task{klass}, because:"
