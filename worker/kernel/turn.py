"""One turn's work before choosing: obey the orders (safety first), clean what dead runs
left, note the replies. Pure; used by `worker.kernel.decide`."""

from __future__ import annotations

from dataclasses import dataclass, field

from worker.kernel.model import (
    ALL_TASKS,
    Act,
    Action,
    ControlOrder,
    Order,
    Reason,
    Snapshot,
)
from worker.models import Task


def effective_orders(snapshot: Snapshot) -> list[ControlOrder]:
    """The trusted orders of the snapshot, and the replies that read as orders, in time order."""
    orders = [order for order in snapshot.controls if order.trusted]
    if snapshot.signals:
        # Here, not at the top: the reply rules load only when there are replies to read.
        from worker.kernel.replies import order_for_signal

        for reply in snapshot.signals:
            order = order_for_signal(reply)
            if order is not None:
                orders.append(order)
    return sorted(orders, key=lambda o: (o.at, o.id))


# Made and read inside one `decide` call, never compared nor printed: no generated `__eq__`
# or `__repr__` (each one more `exec` at every start).
@dataclass(eq=False, repr=False)
class Turn:
    """One turn's working state: the actions and notes so far, the tasks ended, paused or
    resumed by its orders."""

    snap: Snapshot
    actions: list[Action] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ended: set[str] = field(default_factory=set)
    paused: set[str] = field(default_factory=set)  # marks in force, in the orders' order
    paused_now: set[str] = field(default_factory=set)  # paused by an order of this turn
    resumed: dict[str, ControlOrder] = field(default_factory=dict)
    halted: bool = False
    running_paused_by: str | None = None  # the target of the order that paused it
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
        if running is not None and order.targets(running.id) and running.id not in self.ended:
            if order.order.ends_task:
                # A stop wins over a pause given earlier in the same turn.
                self.actions = [a for a in self.actions if a.act is not Act.PAUSE_RUNNING]
                self.running_paused_by = None
                self.act(Act.STOP_RUNNING, running.id, Reason.CANCELLED_ON_STOP, order, why)
                self.ended.add(running.id)
                self.running_taken = hit = True
            elif order.order is Order.PAUSE and not self.running_taken:
                self.act(Act.PAUSE_RUNNING, running.id, Reason.PAUSED_ON_ORDER, order, why)
                self.running_taken = hit = True
                self.running_paused_by = order.task_id
        if order.order.ends_task:
            if order.task_id == ALL_TASKS:
                self.halted = hit = True
                if order.order is Order.CANCEL:  # every task: the queued and waiting ones too
                    for target in self._present():
                        self._end(order, why, target)
            else:
                hit = self._end(order, why) or hit
        elif order.order is Order.PAUSE:
            if not (running is not None and running.id == order.task_id):
                self.act(Act.PAUSE, order.task_id, Reason.PAUSED_ON_ORDER, order, why)
                self.paused.add(order.task_id)
                self.paused_now.add(order.task_id)
        elif order.order is Order.RESUME:
            if self.running_paused_by == order.task_id:
                # A resume after a pause of the same target: the running task goes on.
                self.actions = [a for a in self.actions if a.act is not Act.PAUSE_RUNNING]
                self.running_taken, self.running_paused_by = False, None
            if order.task_id in self.paused:
                self.act(Act.RESUME, order.task_id, Reason.RESUMED_ON_ORDER, order, why)
                self.paused.discard(order.task_id)
                self.paused_now.discard(order.task_id)
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

    def _present(self) -> list[str]:
        """The tasks waiting or queued now (not the running one), each once."""
        snap = self.snap
        ids = [w.task.id for w in snap.ready_waits] + [w.task.id for w in snap.waiting]
        ids += [task.id for task in _queued(snap)]
        running = snap.running.id if snap.running is not None else None
        return [i for i in dict.fromkeys(ids) if i != running]

    def _end(self, order: ControlOrder, why: str, target: str | None = None) -> bool:
        hit = False
        target = target or order.task_id
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
        if not self.snap.signals:
            return
        from worker.kernel.replies import Signal  # only with replies (see effective_orders)

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
