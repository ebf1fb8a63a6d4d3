"""The registry of flows: each kind of flow, its priority class and its policies, and the
detector that finds the flows of a snapshot.

The kernel holds the plan (foreground, paused, queued, why, how to resume), never a flow's own
state: a running task lives in its claim, a wait state in its file, a queued task in its
source. Kinds are an ordered tuple; a new kind joins the same way.
"""

# Annotations evaluated as written, not postponed: worker/config.py says why.

from typing import Any, NamedTuple

from worker.kernel.model import Act, Priority, Snapshot
from worker.models import Task


class FlowKind(NamedTuple):
    """A kind of flow: its priority class, what preempts it, what orders do to it."""

    name: str
    priority: Priority
    preemptable_by: tuple[Priority, ...]  # classes that may take the turn from it
    on_stop: Act | None  # what an explicit stop or cancel order does to it
    on_pause: Act | None  # what a pause order does to it
    resume: str  # the resume protocol, in words (for `worker why`)
    staleness: str  # the staleness policy, in words


_SAFETY = (Priority.SAFETY,)
_ANY = tuple(Priority)

KINDS: tuple[FlowKind, ...] = (
    FlowKind(
        "control",
        Priority.SAFETY,
        (),
        None,
        None,
        "an order is obeyed once, then consumed",
        "an order whose task never shows up is dropped after its time to live (CONTROL_EXPIRED)",
    ),
    FlowKind(
        "running",
        Priority.HARD_BLOCKER,
        _SAFETY,
        Act.STOP_RUNNING,
        Act.PAUSE_RUNNING,
        "a stopped task keeps its work; a paused one resumes from its wait state",
        "a dead run's claim expires with its lease and the task comes back",
    ),
    FlowKind(
        "wait_ready",
        Priority.HARD_BLOCKER,
        _SAFETY,
        Act.CANCEL_WAIT,
        Act.PAUSE,
        "resumed in its mode and session, with the answer it waited for",
        "expired by the wait-state owner after its TTL",
    ),
    FlowKind(
        "forced",
        Priority.FOREGROUND,
        _SAFETY,
        Act.DROP_QUEUED,
        Act.PAUSE,
        "asked for by `--task-id`: runs now",
        "n/a",
    ),
    FlowKind(
        "inbox",
        Priority.FOREGROUND,
        (*_SAFETY, Priority.HARD_BLOCKER),
        Act.DROP_QUEUED,
        Act.PAUSE,
        "taken when nothing more urgent is present",
        "a claimed message whose lease expired goes back to the inbox",
    ),
    FlowKind(
        "waiting",
        Priority.PENDING,
        _ANY,
        Act.CANCEL_WAIT,
        Act.PAUSE,
        "resumed when its condition is met, or on a resume order or reply",
        "expired by the wait-state owner after its TTL",
    ),
    FlowKind(
        "github",
        Priority.PENDING,
        _ANY,
        Act.DROP_QUEUED,
        Act.PAUSE,
        "taken when no foreground task is present",
        "claims are leases",
    ),
    FlowKind(
        "fallback",
        Priority.OPPORTUNISTIC,
        _ANY,
        Act.DROP_QUEUED,
        Act.PAUSE,
        "taken when nothing else is present, once per interval",
        "n/a",
    ),
)
BY_NAME = {kind.name: kind for kind in KINDS}
# A source not in the registry is a pending obligation, after GitHub's.
_OTHER = FlowKind(
    "other",
    Priority.PENDING,
    _ANY,
    Act.DROP_QUEUED,
    Act.PAUSE,
    "taken in its source's order",
    "claims are leases",
)


def kind_of_source(source: str) -> FlowKind:
    return BY_NAME.get(source, _OTHER)


class Flow(NamedTuple):
    """One flow as the detector sees it (the RFC's present/active/pending/stale)."""

    kind: FlowKind
    task_id: str
    present: bool = True
    active: bool = False  # engaged now (running)
    pending: bool = False  # something to do, not in the foreground
    stale: bool = False
    resume_brief: str = ""
    last_active_at: float | None = None
    task: Task | None = None
    ref: Any = None

    @property
    def priority(self) -> Priority:
        return self.kind.priority


def brief(kind: str, task: Task) -> str:
    """The deterministic fallback resume brief."""
    return f"{kind} {task.id}: {task.title}"[:300]


def detect(snapshot: Snapshot) -> list[Flow]:
    """Every flow present in the snapshot, in priority order (stable within a class)."""
    flows: list[Flow] = [
        Flow(BY_NAME["control"], order.task_id, pending=True, ref=order)
        for order in snapshot.controls
    ]
    if snapshot.running is not None:
        task = snapshot.running
        flows.append(
            Flow(
                BY_NAME["running"],
                task.id,
                active=True,
                task=task,
                resume_brief=brief("running", task),
                last_active_at=snapshot.now,
            )
        )
    for ready in snapshot.ready_waits:
        flows.append(
            Flow(
                BY_NAME["wait_ready"],
                ready.task.id,
                pending=True,
                task=ready.task,
                resume_brief=brief("resume", ready.task),
                last_active_at=ready.waiting_since,
                ref=ready,
            )
        )
    if snapshot.forced is not None:
        flows.append(
            Flow(BY_NAME["forced"], snapshot.forced.id, pending=True, task=snapshot.forced)
        )
    for waiting in snapshot.waiting:
        last = waiting.last_active_at if waiting.last_active_at is not None else snapshot.now
        flows.append(
            Flow(
                BY_NAME["waiting"],
                waiting.task.id,
                pending=True,
                task=waiting.task,
                resume_brief=waiting.resume_brief or brief("waiting", waiting.task),
                last_active_at=last,
                ref=waiting,
            )
        )
    for listing in snapshot.listings:
        kind = kind_of_source(listing.source)
        flows.extend(Flow(kind, task.id, pending=True, task=task) for task in listing.tasks)
    flows.extend(
        Flow(
            BY_NAME["running"] if item.kind == "claim" else _OTHER,
            item.id,
            present=True,
            stale=True,
            ref=item,
        )
        for item in snapshot.stale
    )
    flows.sort(key=lambda flow: flow.priority)
    return flows


def presence(flows: list[Flow]) -> dict[str, int]:
    """The presence flags of the decision event: how many flows of each kind."""
    counts: dict[str, int] = {}
    for flow in flows:
        name = "stale" if flow.stale else flow.kind.name
        counts[name] = counts.get(name, 0) + 1
    return counts
