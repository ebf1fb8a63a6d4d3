"""`worker queue`: the queued tasks of every source, in the order runs would take them.

Nothing is re-ordered here: the order and the reasons are the scheduling kernel's own
(`worker.kernel.snapshot.preview` observes the world and `decide` chooses), read without claiming,
writing or moving anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from worker.config import Settings
from worker.kernel.explain import WORDS
from worker.kernel.model import Decision, Reason, Snapshot
from worker.kernel.snapshot import preview


@dataclass(frozen=True)
class QueueRow:
    position: int | None  # 1 is next; None: not in line (paused, waiting, skipped)
    task_id: str
    source: str
    title: str
    why: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def queue(settings: Settings) -> list[QueueRow]:
    snap, decision = preview(settings)
    return plan_rows(snap, decision)


def plan_rows(snap: Snapshot, decision: Decision) -> list[QueueRow]:
    """The decision read as a queue: the chosen task first, then the others in line, then
    what is held back (paused, waiting) and what the sources passed over, each with why."""
    titles = {t.id: t.title for listing in snap.listings for t in listing.tasks}
    titles.update({w.task.id: w.task.title for w in snap.ready_waits})
    titles.update({w.task.id: w.task.title for w in snap.waiting})
    halted = Reason.HALTED in decision.reason_codes
    rows: list[QueueRow] = []
    if decision.task is not None:
        codes = [c for c in decision.reason_codes if c in _CHOSEN]
        why = "next: " + "; ".join(WORDS.get(c, c) for c in codes[:2])
        rows.append(QueueRow(1, decision.task.id, decision.source or "", decision.task.title, why))
    ahead = decision.task.id if decision.task is not None else None
    for entry in decision.queued:
        title = titles.get(entry.task_id, "")
        if halted:
            why = "held back: " + WORDS[Reason.HALTED]
            rows.append(QueueRow(None, entry.task_id, entry.kind, title, why))
            continue
        klass = entry.priority.name.lower().replace("_", " ")
        why = f"after {ahead} ({klass} class)" if ahead else f"{klass} class"
        rows.append(QueueRow(len(rows) + 1, entry.task_id, entry.kind, title, why))
        ahead = entry.task_id
    for entry in decision.paused:
        why = "waiting: " if entry.kind == "waiting" else "paused by an order: "
        rows.append(
            QueueRow(
                None,
                entry.task_id,
                entry.kind,
                titles.get(entry.task_id, ""),
                why + entry.resume_brief,
            )
        )
    for listing in snap.listings:
        for skipped in listing.skipped:
            detail = f": {skipped.detail}" if skipped.detail else ""
            why = f"passed over: {_SKIPPED.get(skipped.reason_code, skipped.reason_code)}{detail}"
            rows.append(QueueRow(None, skipped.task_id, listing.source, "", why))
        for error in listing.errors:
            rows.append(QueueRow(None, "-", listing.source, "", f"unreadable: {error}"))
    return rows


_CHOSEN = {
    Reason.TASK_ID_REQUESTED,
    Reason.WAIT_STATE_RESUMED,
    Reason.INBOX_TASK_SELECTED,
    Reason.GITHUB_TASK_SELECTED,
    Reason.FALLBACK_MAINTENANCE,
    Reason.HARD_BLOCKER_ACTIVE,
    Reason.FOREGROUND_TASK,
    Reason.PENDING_NUDGE,
    Reason.OPPORTUNISTIC_TASK,
}
_SKIPPED = {
    "REPLY_NOT_TASK": "a reply to a waiting task, not a task",
    "CONTROL_NOT_TASK": "an order (stop, cancel, pause, resume), not a task",
    "MESSAGE_REJECTED": "the message cannot be read",
    "MESSAGE_INCOMPLETE": "the message is still being written (read again by a later run)",
    "MESSAGE_NOT_UNREAD": "its status is not `unread`",
    "MAINTENANCE_SETUP_PROBLEM": "its checks cannot run (a set-up problem, no agent)",
    "NOT_A_MESSAGE_FILE": "no regular file (left where it is)",
}
