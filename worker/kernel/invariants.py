"""The kernel's invariants (the RFC's release blockers, for worker's flows).

`check(snapshot, decision)` runs inside `decide` on every decision, and the property tests run
it over thousands of generated snapshots. A violation is a bug in the kernel, never a user
error: it raises `InvariantViolation` (an AssertionError that `python -O` does not remove).
"""

from __future__ import annotations

from worker.kernel.model import (
    ALL_TASKS,
    Act,
    ControlOrder,
    Decision,
    Order,
    Priority,
    Reason,
    Snapshot,
    StaleItem,
)
from worker.kernel.registry import kind_of_source
from worker.kernel.turn import effective_orders


class InvariantViolation(AssertionError):
    pass


def _fail(name: str, detail: str) -> None:
    raise InvariantViolation(f"kernel invariant {name!r} violated: {detail}")


def check(snapshot: Snapshot, decision: Decision) -> None:
    orders = _live(effective_orders(snapshot))
    _safety_preempts(snapshot, decision, orders)
    _stop_and_switch(snapshot, decision, orders)
    _ready_waits_first(snapshot, decision, orders)
    _priority(snapshot, decision, orders)
    _plan(decision)
    _slots(snapshot, decision)
    _work_kept(decision)
    _closed_reason_codes(decision)


def _chosen(decision: Decision) -> str | None:
    return decision.task.id if decision.task is not None else None


def _acted(decision: Decision) -> set[tuple[Act, str]]:
    return {(a.act, a.task_id) for a in decision.actions}


def _safety_preempts(snapshot: Snapshot, decision: Decision, orders: list[ControlOrder]) -> None:
    """Safety always preempts: a task an order ends or pauses is never the foreground, and
    every present flow an order ends gets its ending action."""
    chosen, acted, present = _chosen(decision), _acted(decision), _present_ids(snapshot)
    for order in orders:
        if (
            order.task_id != ALL_TASKS
            and chosen == order.task_id
            and order.order is not Order.RESUME
        ):
            _fail("safety preempts", f"{chosen} chosen despite order {order.id}")
        if (
            order.order.ends_task
            and order.task_id in present
            and not any(
                (act, order.task_id) in acted
                for act in (Act.STOP_RUNNING, Act.CANCEL_WAIT, Act.DROP_QUEUED)
            )
        ):
            _fail("safety preempts", f"order {order.id} left {order.task_id} untouched")
        if (
            order.order is not Order.RESUME
            and order.task_id == ALL_TASKS
            and chosen
            and (snapshot.running is None or chosen != snapshot.running.id)
        ):
            _fail("safety preempts", f"{chosen} started despite order {order.id} for every task")


def _stop_and_switch(snapshot: Snapshot, decision: Decision, orders: list[ControlOrder]) -> None:
    """No task stays running after an explicit stop; at most one switch per turn."""
    running, chosen = snapshot.running, _chosen(decision)
    if running is None:
        return
    stops = [o for o in orders if o.order.ends_task and o.targets(running.id)]
    if stops and ((Act.STOP_RUNNING, running.id) not in _acted(decision) or chosen == running.id):
        _fail("stop ends the running task", f"{running.id} still running")
    taken = any(
        o.order in (Order.STOP, Order.CANCEL, Order.PAUSE) and o.targets(running.id) for o in orders
    )
    # At most one switch per turn: a running task is only left for an order.
    if not taken and chosen != running.id:
        _fail("one switch per turn", f"{chosen} replaced running {running.id}")


def _ready_waits_first(snapshot: Snapshot, decision: Decision, orders: list[ControlOrder]) -> None:
    """A ready wait state is served before any new task."""
    if (
        decision.task is not None
        and decision.wait is None
        and snapshot.forced is None
        and snapshot.running is None
        and any(
            w.task.id not in snapshot.excluded | snapshot.others_running
            and w.task.id not in snapshot.paused
            and not _ended(orders, w.task.id)
            for w in snapshot.ready_waits
        )
    ):
        _fail("ready waits first", f"{_chosen(decision)} chosen while a wait state is ready")


def _priority(snapshot: Snapshot, decision: Decision, orders: list[ControlOrder]) -> None:
    """The chosen flow is of the best class present and eligible (no better class skipped)."""
    if decision.task is not None and decision.priority is None:
        _fail("priority", "a chosen task without its priority class")
    if decision.task is None and decision.priority not in (None, Priority.SAFETY):
        _fail("priority", "idle with a priority other than safety")
    if decision.task is None or decision.priority is None or snapshot.running is not None:
        return
    controls = {o.id for o in snapshot.controls}
    for listing in snapshot.listings:
        better = kind_of_source(listing.source).priority
        if better < decision.priority and any(
            t.id not in snapshot.excluded | snapshot.others_running
            and t.id not in snapshot.paused
            and t.id not in controls
            and not _ended(orders, t.id)
            for t in listing.tasks
        ):
            _fail(
                "priority",
                f"{decision.task.id} ({decision.priority.name}) chosen over a "
                f"{better.name} task of {listing.source}",
            )


def _plan(decision: Decision) -> None:
    """The plan: one foreground; every paused or waiting flow can be resumed."""
    chosen = _chosen(decision)
    for entry in (*decision.paused, *decision.queued):
        if entry.task_id == chosen:
            _fail("one foreground", f"{chosen} is both foreground and {entry.kind}")
    for entry in decision.paused:
        if not entry.resume_brief or entry.last_active_at is None:
            _fail("resume brief", f"paused flow {entry.task_id} lacks a brief or last_active_at")


def _slots(snapshot: Snapshot, decision: Decision) -> None:
    """At most `slots` tasks at once: a task another slot runs is never chosen again, and no
    new task starts while every slot is busy or a shared limit holds new tasks back."""
    chosen = _chosen(decision)
    if chosen is None or (snapshot.running is not None and chosen == snapshot.running.id):
        return
    if chosen in snapshot.others_running:
        _fail("one slot per task", f"{chosen} chosen while another slot runs it")
    if len(snapshot.others_running) >= snapshot.slots:
        _fail("at most max_parallel", f"{chosen} chosen with {snapshot.slots} slots busy")
    if snapshot.held is not None:
        _fail("shared limits", f"{chosen} chosen while {snapshot.held} holds new tasks back")


def _work_kept(decision: Decision) -> None:
    """Nothing holding work is deleted."""
    for action in decision.actions:
        item = action.ref
        if action.act is Act.CLEAN and (not isinstance(item, StaleItem) or item.holds_work):
            _fail("work kept", f"{action.task_id} holds work and would be cleaned")


def _closed_reason_codes(decision: Decision) -> None:
    """Reason codes come from the closed list."""
    known = {r.value for r in Reason}
    unknown = [c for c in decision.reason_codes if c not in known]
    if unknown:
        _fail("closed reason codes", f"unknown codes {unknown}")


def _live(orders: list[ControlOrder]) -> list[ControlOrder]:
    """The orders in force: a pause followed by a resume of the same target is lifted."""
    return [
        o
        for n, o in enumerate(orders)
        if not (
            o.order is Order.PAUSE
            and any(r.order is Order.RESUME and r.task_id == o.task_id for r in orders[n + 1 :])
        )
    ]


def _ended(orders: list[ControlOrder], task_id: str) -> bool:
    return any(
        (o.order.ends_task and o.task_id == task_id)
        or (o.order is Order.PAUSE and o.task_id in (task_id, ALL_TASKS))
        or (o.task_id == ALL_TASKS and o.order.ends_task)
        for o in orders
    )


def _present_ids(snapshot: Snapshot) -> set[str]:
    ids = {w.task.id for w in snapshot.ready_waits} | {w.task.id for w in snapshot.waiting}
    ids |= {t.id for listing in snapshot.listings for t in listing.tasks}
    if snapshot.forced is not None:
        ids.add(snapshot.forced.id)
    if snapshot.running is not None:
        ids.add(snapshot.running.id)
    return ids
