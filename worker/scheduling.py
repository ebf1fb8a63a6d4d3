"""decide(snapshot) -> Decision: the pure choice of what this run does.

Priority: a task asked for by `--task-id`, then the oldest ready wait state, then each source
in its order (inbox, GitHub, fallback maintenance). Every decision carries reason codes from
the closed list `Reason`, and the count of candidates each source offered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from worker.models import Task
from worker.sources.base import Listing


class Reason(StrEnum):
    TASK_ID_REQUESTED = "TASK_ID_REQUESTED"
    WAIT_STATE_RESUMED = "WAIT_STATE_RESUMED"
    INBOX_TASK_SELECTED = "INBOX_TASK_SELECTED"
    GITHUB_TASK_SELECTED = "GITHUB_TASK_SELECTED"
    FALLBACK_MAINTENANCE = "FALLBACK_MAINTENANCE"
    NOTHING_TO_DO = "NOTHING_TO_DO"
    CLAIM_LOST = "CLAIM_LOST"  # another run took a candidate first; the next one was tried
    SOURCE_ERROR = "SOURCE_ERROR"  # a source could not be read; the others were used
    LEASE_EXPIRED = "LEASE_EXPIRED"  # a dead run's claim came back this run
    WAITS_PENDING = "WAITS_PENDING"  # wait states exist, none ready


_SELECTED = {
    "inbox": Reason.INBOX_TASK_SELECTED,
    "github": Reason.GITHUB_TASK_SELECTED,
    "fallback": Reason.FALLBACK_MAINTENANCE,
}


@dataclass(frozen=True)
class ReadyWait:
    """A wait state whose condition is met, with what the agent waited for."""

    task: Task
    waiting_since: float  # epoch seconds; the oldest ready wait is served first
    answer: str = ""  # the approval note, the reply's body, the decision
    ref: Any = None  # the wait-state store's handle (its file)


@dataclass(frozen=True)
class Snapshot:
    listings: tuple[Listing, ...] = ()  # in source priority order
    ready_waits: tuple[ReadyWait, ...] = ()
    pending_waits: int = 0
    forced: Task | None = None  # `--task-id`
    excluded: frozenset[str] = frozenset()  # ids lost to another run this turn
    notes: tuple[str, ...] = ()  # reason codes observed before deciding (e.g. LEASE_EXPIRED)


@dataclass(frozen=True)
class Decision:
    task: Task | None
    source: str | None
    reason_codes: tuple[str, ...]
    candidates: dict[str, int] = field(default_factory=dict)
    wait: ReadyWait | None = None

    @property
    def idle(self) -> bool:
        return self.task is None


def decide(snapshot: Snapshot) -> Decision:
    candidates = {listing.source: len(listing.tasks) for listing in snapshot.listings}
    candidates["waits_ready"] = len(snapshot.ready_waits)
    notes = list(snapshot.notes)
    if any(listing.errors for listing in snapshot.listings):
        notes.append(Reason.SOURCE_ERROR)
    if snapshot.excluded:
        notes.append(Reason.CLAIM_LOST)

    def chosen(task: Task, source: str, code: str, wait: ReadyWait | None = None) -> Decision:
        return Decision(task, source, (code, *dict.fromkeys(notes)), candidates, wait)

    if snapshot.forced is not None:
        return chosen(snapshot.forced, snapshot.forced.source, Reason.TASK_ID_REQUESTED)
    ready = [w for w in snapshot.ready_waits if w.task.id not in snapshot.excluded]
    if ready:
        oldest = min(ready, key=lambda w: (w.waiting_since, w.task.id))
        return chosen(oldest.task, "wait", Reason.WAIT_STATE_RESUMED, oldest)
    for listing in snapshot.listings:
        for task in listing.tasks:
            if task.id not in snapshot.excluded:
                code = _SELECTED.get(listing.source, f"{listing.source.upper()}_TASK_SELECTED")
                return chosen(task, listing.source, code)
    if snapshot.pending_waits:
        notes.append(Reason.WAITS_PENDING)
    return Decision(None, None, (Reason.NOTHING_TO_DO, *dict.fromkeys(notes)), candidates)
