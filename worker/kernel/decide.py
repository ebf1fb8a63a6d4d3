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

from dataclasses import dataclass, field

from worker.kernel import invariants
from worker.kernel.model import (
    ALL_TASKS,
    Act,
    Action,
    ControlOrder,
    Decision,
    Order,
    PlanEntry,
    Priority,
    ReadyWait,
    Reason,
    Snapshot,
    WaitingFlow,
)
from worker.kernel.registry import BY_NAME, brief, detect, kind_of_source, presence
from worker.kernel.replies import Signal, order_for_signal
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


def effective_orders(snapshot: Snapshot) -> list[ControlOrder]:
    """The trusted orders of the snapshot, and the replies that read as orders, in time order."""
    orders = [order for order in snapshot.controls if order.trusted]
    for reply in snapshot.signals:
        order = order_for_signal(reply)
        if order is not None:
            orders.append(order)
    return sorted(orders, key=lambda o: (o.at, o.id))


@dataclass
class _Turn:
    snap: Snapshot
    actions: list[Action] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ended: set[str] = field(default_factory=set)
    paused: set[str] = field(default_factory=set)
    resumed: dict[str, ControlOrder] = field(default_factory=dict)
    halted: bool = False
    running_taken: bool = False  # an order stopped or paused the running task

    def act(
        self,
        act: Act,
        task_id: str,
        reason: str,
        order: ControlOrder | None = None,
        detail: str = "",
        ref: object = None,
    ) -> None:
        self.actions.append(Action(act, task_id, reason, order.id if order else None, detail, ref))

    # -- 1. safety ---------------------------------------------------------------------------
    def obey(self, order: ControlOrder) -> None:
        snap, running = self.snap, self.snap.running
        why = f"{order.order.value} by {order.origin}" + (
            f": {order.reason}" if order.reason else ""
        )
        hit = order.order is not Order.CANCEL and order.order is not Order.STOP
        if running is not None and order.targets(running.id) and not self.running_taken:
            if order.order.ends_task:
                self.act(Act.STOP_RUNNING, running.id, Reason.CANCELLED_ON_STOP, order, why)
                self.ended.add(running.id)
            elif order.order is Order.PAUSE:
                self.act(Act.PAUSE_RUNNING, running.id, Reason.PAUSED_ON_ORDER, order, why)
            self.running_taken = order.order in (Order.STOP, Order.CANCEL, Order.PAUSE)
            hit = True
        if order.order.ends_task:
            if order.task_id == ALL_TASKS:
                self.halted = hit = True
            else:
                hit = self._end(order, why) or hit
        elif order.order is Order.PAUSE:
            if not (running is not None and running.id == order.task_id):
                self.act(Act.PAUSE, order.task_id, Reason.PAUSED_ON_ORDER, order, why)
                self.paused.add(order.task_id)
        elif order.order is Order.RESUME:
            if order.task_id in self.paused or order.task_id in snap.paused:
                self.act(Act.RESUME, order.task_id, Reason.RESUMED_ON_ORDER, order, why)
                self.paused.discard(order.task_id)
            if any(w.task.id == order.task_id for w in snap.waiting):
                self.resumed[order.task_id] = order
        if order.origin == "reply":
            return  # a reply is recorded once by its NOTE_REPLY action
        if hit:
            self.act(Act.CONSUME_ORDER, order.task_id, _main_reason(order), order)
        elif snap.now and order.at and snap.now - order.at > snap.control_ttl_s:
            self.act(
                Act.CONSUME_ORDER,
                order.task_id,
                Reason.CONTROL_EXPIRED,
                order,
                "its task never showed up",
            )

    def _end(self, order: ControlOrder, why: str) -> bool:
        hit = False
        target = order.task_id
        if target in self.ended:
            return True
        for ready in self.snap.ready_waits:
            if ready.task.id == target:
                self.act(Act.CANCEL_WAIT, target, Reason.WAIT_CANCELLED, order, why, ready.ref)
                hit = True
        for waiting in self.snap.waiting:
            if waiting.task.id == target and not hit:
                self.act(Act.CANCEL_WAIT, target, Reason.WAIT_CANCELLED, order, why, waiting.ref)
                hit = True
        for task in _queued(self.snap):
            if task.id == target:
                self.act(Act.DROP_QUEUED, target, Reason.QUEUED_DROPPED, order, why, task)
                hit = True
                break
        if hit:
            self.ended.add(target)
        return hit

    # -- 2. staleness, 3. replies ------------------------------------------------------------
    def clean(self, keep: set[str]) -> None:
        for item in self.snap.stale:
            if item.kind == "claim" and item.id in keep:
                continue  # about to be claimed again this turn
            act = Act.KEEP_WORK if item.holds_work else Act.CLEAN
            self.act(act, item.id, Reason.STALE_CLEANUP, None, f"{item.kind}: {item.rule}", item)

    def replies(self) -> None:
        for reply in self.snap.signals:
            if reply.acts or reply.signal == Signal.UNKNOWN:
                self.act(
                    Act.NOTE_REPLY,
                    reply.task_id,
                    Reason.REPLY_INTERPRETED,
                    None,
                    f"{reply.signal}:{reply.confidence:.2f}",
                    reply,
                )
            else:
                self.act(
                    Act.CLARIFY,
                    reply.task_id,
                    Reason.CLARIFICATION_ASKED,
                    None,
                    f"{reply.signal}:{reply.confidence:.2f}",
                    reply,
                )


def _main_reason(order: ControlOrder) -> str:
    return {
        Order.STOP: Reason.CANCELLED_ON_STOP,
        Order.CANCEL: Reason.CANCELLED_ON_STOP,
        Order.PAUSE: Reason.PAUSED_ON_ORDER,
        Order.RESUME: Reason.RESUMED_ON_ORDER,
    }[order.order]


def _queued(snap: Snapshot) -> list[Task]:
    tasks = [snap.forced] if snap.forced is not None else []
    for listing in snap.listings:
        tasks.extend(listing.tasks)
    return tasks


def decide(snapshot: Snapshot, *, check: bool = True) -> Decision:
    turn = _Turn(snapshot)
    for order in snapshot.controls:
        if not order.trusted:
            turn.act(
                Act.CONSUME_ORDER,
                order.task_id,
                Reason.CONTROL_UNTRUSTED,
                order,
                f"{order.order.value} from {order.sender or order.origin} refused",
            )
    for order in effective_orders(snapshot):
        turn.obey(order)
    paused = (set(snapshot.paused) | turn.paused) - {
        a.task_id for a in turn.actions if a.act is Act.RESUME
    }
    halted = turn.halted or ALL_TASKS in paused
    decision = _choose(snapshot, turn, paused, halted)
    if check:
        invariants.check(snapshot, decision)
    return decision


def _choose(snap: Snapshot, turn: _Turn, paused: set[str], halted: bool) -> Decision:
    candidates = {listing.source: len(listing.tasks) for listing in snap.listings}
    candidates["waits_ready"] = len(snap.ready_waits)
    notes = list(snap.notes)
    if any(listing.errors for listing in snap.listings):
        notes.append(Reason.SOURCE_ERROR)
    if snap.excluded:
        notes.append(Reason.CLAIM_LOST)
    blocked = snap.excluded | turn.ended
    control_ids = {o.id for o in snap.controls}
    ready = [w for w in snap.ready_waits if w.task.id not in blocked]
    for task_id, order in turn.resumed.items():
        waiting = next(w for w in snap.waiting if w.task.id == task_id)
        if task_id not in blocked:
            ready.append(_as_ready(waiting, order, snap.now))
    chosen: tuple[Task, str, Priority, str | None, ReadyWait | None] | None = None
    if snap.running is not None and not turn.running_taken:
        chosen = (snap.running, snap.running.source, Priority.HARD_BLOCKER, None, None)
    elif halted:
        notes.append(Reason.HALTED)
    elif snap.forced is not None and snap.forced.id not in blocked | turn.paused:
        chosen = (
            snap.forced,
            snap.forced.source,
            Priority.FOREGROUND,
            Reason.TASK_ID_REQUESTED,
            None,
        )
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
    for waiting in snap.waiting:
        if waiting.task.id in turn.ended or (chosen and chosen[0].id == waiting.task.id):
            continue
        last = waiting.last_active_at if waiting.last_active_at is not None else snap.now
        paused_entries.append(
            PlanEntry(
                waiting.task.id,
                "waiting",
                BY_NAME["waiting"].priority,
                waiting.resume_brief or brief("waiting", waiting.task),
                last,
            )
        )
    turn.clean({chosen[0].id} if chosen else set())
    turn.replies()
    return _decision(snap, turn, chosen, notes, candidates, queued, paused_entries)


def _as_ready(waiting: WaitingFlow, order: ControlOrder, now: float) -> ReadyWait:
    since = waiting.last_active_at if waiting.last_active_at is not None else now
    answer = f"resumed by a {order.origin} order" + (f": {order.reason}" if order.reason else "")
    return ReadyWait(waiting.task, since, answer, waiting.ref)


def _decision(
    snap: Snapshot,
    turn: _Turn,
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
        paused=tuple(paused),
        queued=tuple(queued),
        signals=tuple(f"{s.signal}@{s.task_id}:{s.confidence:.2f}" for s in snap.signals),
        flows=presence(detect(snap)),
    )
