"""decide(snapshot) -> Decision: the one pure function that chooses what a turn does.

Order of work, each step by priority class (`worker.kernel.registry`):
1. safety: control orders (and replies read as orders) stop, cancel, pause or resume flows;
2. staleness: what dead runs left is cleaned, or kept when it holds work;
3. replies that need nothing, or need a clarification, are noted;
4. the foreground: a running task keeps the turn unless an order took it; otherwise the
   forced task, then the oldest ready wait state, then the queued tasks by class.
The invariants (`worker.kernel.invariants`) are checked on every decision.
"""

from __future__ import annotations

from worker.kernel import invariants
from worker.kernel.model import (
    ALL_TASKS,
    Act,
    ControlOrder,
    Decision,
    PlanEntry,
    Priority,
    ReadyWait,
    Reason,
    Snapshot,
    WaitingFlow,
)
from worker.kernel.registry import BY_NAME, brief, detect, kind_of_source, presence
from worker.kernel.turn import Turn, effective_orders
from worker.models import Task

_SELECTED = {
    "inbox": Reason.INBOX_TASK_SELECTED,
    "github": Reason.GITHUB_TASK_SELECTED,
    "fallback": Reason.FALLBACK_MAINTENANCE,
}
_CLASS_CODE = {
    Priority.HARD_BLOCKER: Reason.HARD_BLOCKER_ACTIVE,
    Priority.FOREGROUND: Reason.FOREGROUND_TASK,
    Priority.PENDING: Reason.PENDING_NUDGE,
    Priority.OPPORTUNISTIC: Reason.OPPORTUNISTIC_TASK,
}
_SAFETY_ACTS = {
    Act.STOP_RUNNING,
    Act.PAUSE_RUNNING,
    Act.CANCEL_WAIT,
    Act.DROP_QUEUED,
    Act.PAUSE,
    Act.RESUME,
}


def decide(snapshot: Snapshot, *, check: bool = True) -> Decision:
    turn = Turn(snapshot)
    for order in snapshot.controls:
        if not order.trusted:
            turn.act(
                Act.CONSUME_ORDER,
                order.task_id,
                Reason.CONTROL_UNTRUSTED,
                order,
                f"{order.order.value} from {order.sender or order.origin} refused",
            )
    turn.paused = set(snapshot.paused)
    for order in effective_orders(snapshot):
        turn.obey(order)
    paused = turn.paused
    halted = turn.halted or ALL_TASKS in paused
    decision = _choose(snapshot, turn, paused, halted)
    if check:
        invariants.check(snapshot, decision)
    return decision


def _choose(snap: Snapshot, turn: Turn, paused: set[str], halted: bool) -> Decision:
    candidates = {listing.source: len(listing.tasks) for listing in snap.listings}
    candidates["waits_ready"] = len(snap.ready_waits)
    notes = list(snap.notes)
    if any(listing.errors for listing in snap.listings):
        notes.append(Reason.SOURCE_ERROR)
    if snap.excluded:
        notes.append(Reason.CLAIM_LOST)
    blocked = snap.excluded | turn.ended | snap.others_running
    if _present(snap) & snap.others_running:
        notes.append(Reason.RUNNING_IN_SLOT)
    full = bool(snap.held or len(snap.others_running) >= snap.slots)
    if full and (snap.running is None or turn.running_taken):
        notes.append(snap.held or Reason.SLOTS_FULL)  # the orders still act; nothing starts
    if turn.running_taken and snap.running is not None:
        blocked = blocked | {snap.running.id}  # paused by an order: not chosen again now
    control_ids = {o.id for o in snap.controls}
    ready = _ready(snap, turn, blocked)
    chosen: tuple[Task, str, Priority, str | None, ReadyWait | None] | None = None
    if snap.running is not None and not turn.running_taken:
        chosen = (snap.running, snap.running.source, Priority.HARD_BLOCKER, None, None)
    elif halted:
        notes.append(Reason.HALTED)
    elif not full and snap.forced is not None and snap.forced.id not in blocked | turn.paused_now:
        chosen = (
            snap.forced,
            snap.forced.source,
            Priority.FOREGROUND,
            Reason.TASK_ID_REQUESTED,
            None,
        )
    halted = halted or full
    queued: list[PlanEntry] = []
    paused_entries: list[PlanEntry] = []
    eligible_ready = [w for w in ready if w.task.id not in paused]
    if any(w.task.id in paused for w in ready):
        notes.append(Reason.TASK_PAUSED)
    if chosen is None and not halted and eligible_ready:
        oldest = min(eligible_ready, key=lambda w: (w.waiting_since, w.task.id))
        chosen = (oldest.task, "wait", Priority.HARD_BLOCKER, Reason.WAIT_STATE_RESUMED, oldest)
    for wait in eligible_ready:
        if chosen is None or wait is not chosen[4]:
            queued.append(
                PlanEntry(
                    wait.task.id,
                    "wait_ready",
                    Priority.HARD_BLOCKER,
                    brief("resume", wait.task),
                    wait.waiting_since,
                )
            )
    ordered = sorted(snap.listings, key=lambda listing: kind_of_source(listing.source).priority)
    for listing in ordered:
        kind = kind_of_source(listing.source)
        for task in listing.tasks:
            if task.id in blocked:
                continue
            if task.id in control_ids:
                notes.append(Reason.CONTROL_NOT_TASK)
                continue
            entry = PlanEntry(
                task.id, kind.name, kind.priority, brief(kind.name, task), snap.now or None
            )
            if task.id in paused:
                notes.append(Reason.TASK_PAUSED)
                paused_entries.append(entry)
            elif chosen is None and not halted:
                code = _SELECTED.get(listing.source, Reason.FOREGROUND_TASK)
                chosen = (task, listing.source, kind.priority, code, None)
            else:
                queued.append(entry)
    paused_entries += _waiting_entries(snap, turn, chosen[0].id if chosen else None)
    turn.clean({chosen[0].id} if chosen else set())
    turn.replies()
    return _decision(snap, turn, chosen, notes, candidates, queued, paused_entries)


def _present(snap: Snapshot) -> set[str]:
    """The ids of the candidates: ready waits and listed tasks."""
    ids = {w.task.id for w in snap.ready_waits}
    return ids | {t.id for listing in snap.listings for t in listing.tasks}


def _ready(snap: Snapshot, turn: Turn, blocked: frozenset[str] | set[str]) -> list[ReadyWait]:
    """The ready wait states, and the waiting flows an order resumed, less the blocked ones."""
    ready = [w for w in snap.ready_waits if w.task.id not in blocked]
    for task_id, order in turn.resumed.items():
        waiting = next(w for w in snap.waiting if w.task.id == task_id)
        if task_id not in blocked:
            ready.append(_as_ready(waiting, order, snap.now))
    return ready


def _waiting_entries(snap: Snapshot, turn: Turn, chosen_id: str | None) -> list[PlanEntry]:
    """The plan's entries for the flows still waiting (not ended, not chosen now)."""
    entries = []
    for waiting in snap.waiting:
        if waiting.task.id in turn.ended or chosen_id == waiting.task.id:
            continue
        last = waiting.last_active_at if waiting.last_active_at is not None else snap.now
        entries.append(
            PlanEntry(
                waiting.task.id,
                "waiting",
                BY_NAME["waiting"].priority,
                waiting.resume_brief or brief("waiting", waiting.task),
                last,
            )
        )
    return entries


def _as_ready(waiting: WaitingFlow, order: ControlOrder, now: float) -> ReadyWait:
    since = waiting.last_active_at if waiting.last_active_at is not None else now
    answer = f"resumed by a {order.origin} order" + (f": {order.reason}" if order.reason else "")
    return ReadyWait(waiting.task, since, answer, waiting.ref)


def _decision(
    snap: Snapshot,
    turn: Turn,
    chosen: tuple[Task, str, Priority, str | None, ReadyWait | None] | None,
    notes: list[str],
    candidates: dict[str, int],
    queued: list[PlanEntry],
    paused: list[PlanEntry],
) -> Decision:
    safety = any(a.act in _SAFETY_ACTS for a in turn.actions)
    codes: list[str] = []
    priority: Priority | None = Priority.SAFETY if safety else None
    task = source = wait = None
    if chosen is not None:
        task, source, priority, code, wait = chosen
        codes += [c for c in (code, _CLASS_CODE[priority]) if c]
        if wait is not None:
            codes.append(Reason.RESUME_PREVIOUS_FLOW)
    else:
        if Reason.PR_ENDED not in notes:  # a task that ended is what the run did
            codes.append(Reason.NOTHING_TO_DO)
        if snap.pending_waits:
            notes.append(Reason.WAITS_PENDING)
    if safety:
        codes.append(Reason.SAFETY_OVERRIDE)
    codes += [a.reason for a in turn.actions]
    codes += notes
    return Decision(
        task=task,
        source=source,
        reason_codes=tuple(dict.fromkeys(codes)),
        candidates=candidates,
        wait=wait,
        priority=priority,
        actions=tuple(turn.actions),
        paused=tuple(e for e in paused if task is None or e.task_id != task.id),
        queued=tuple(e for e in queued if task is None or e.task_id != task.id),
        signals=tuple(f"{s.signal}@{s.task_id}:{s.confidence:.2f}" for s in snap.signals),
        flows=presence(detect(snap)),
    )
