"""The kernel's vocabulary: priority classes, reason codes, snapshots, actions, decisions.

Everything here is data (frozen dataclasses, NamedTuples and closed enums); deciding lives in
`worker.kernel.decide`, reading the world in `observe`, changing it in `effects`. A record that
compares every field (or is never compared), is never copied with `dataclasses.replace` and
never serialised whole is a NamedTuple: built with one `eval` instead of six `exec`s (a frozen
dataclass's generated methods on Python 3.11), about 0.4 ms of every command's start-up each.
"""

# Annotations evaluated as written, not postponed: worker/config.py says why.

from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any, NamedTuple

from worker.models import Task
from worker.sources.base import Listing


class Priority(IntEnum):
    """Priority classes, strictly ordered: a lower value always wins (the RFC's order)."""

    SAFETY = 0  # a stop, cancel or pause order; a supervisor emergency
    HARD_BLOCKER = 1  # a task already running; a wait state whose condition is met
    FOREGROUND = 2  # an inbox task, `--task-id`
    PENDING = 3  # GitHub tasks
    OPPORTUNISTIC = 4  # the maintenance task


class Reason(StrEnum):
    """The closed list of reason codes a decision may carry."""

    # what was chosen (the source's own code, kept from the first scheduler)
    TASK_ID_REQUESTED = "TASK_ID_REQUESTED"
    WAIT_STATE_RESUMED = "WAIT_STATE_RESUMED"
    INBOX_TASK_SELECTED = "INBOX_TASK_SELECTED"
    GITHUB_TASK_SELECTED = "GITHUB_TASK_SELECTED"
    FALLBACK_MAINTENANCE = "FALLBACK_MAINTENANCE"
    NOTHING_TO_DO = "NOTHING_TO_DO"
    # notes observed before or while deciding
    CLAIM_LOST = "CLAIM_LOST"  # another run took a candidate first; the next one was tried
    SOURCE_ERROR = "SOURCE_ERROR"  # a source could not be read; the others were used
    LEASE_EXPIRED = "LEASE_EXPIRED"  # a dead run's claim came back this run
    ORPHAN_AGENT_ENDED = "ORPHAN_AGENT_ENDED"  # a dead run's agent was still running
    WAITS_PENDING = "WAITS_PENDING"  # wait states exist, none ready
    PR_ENDED = "PR_ENDED"  # a waiting task's pull request was merged or closed: the task ended
    # the RFC's kinds of reasons, one per priority class and per preemption
    SAFETY_OVERRIDE = "SAFETY_OVERRIDE"  # a control order preempted the usual order
    HARD_BLOCKER_ACTIVE = "HARD_BLOCKER_ACTIVE"  # a running task or a ready wait holds the turn
    FOREGROUND_TASK = "FOREGROUND_TASK"
    PENDING_NUDGE = "PENDING_NUDGE"  # a pending obligation served: nothing more urgent
    OPPORTUNISTIC_TASK = "OPPORTUNISTIC_TASK"
    CANCELLED_ON_STOP = "CANCELLED_ON_STOP"  # a running task was stopped by an order
    RESUME_PREVIOUS_FLOW = "RESUME_PREVIOUS_FLOW"  # a paused flow comes back to the foreground
    STALE_CLEANUP = "STALE_CLEANUP"
    # what the orders did
    WAIT_CANCELLED = "WAIT_CANCELLED"
    QUEUED_DROPPED = "QUEUED_DROPPED"
    PAUSED_ON_ORDER = "PAUSED_ON_ORDER"
    RESUMED_ON_ORDER = "RESUMED_ON_ORDER"
    TASK_PAUSED = "TASK_PAUSED"  # a candidate was passed over: it is paused by an order
    HALTED = "HALTED"  # a pause order for every task (`*`): nothing new starts
    CONTROL_NOT_TASK = "CONTROL_NOT_TASK"  # a control message was listed as a task; skipped
    CONTROL_EXPIRED = "CONTROL_EXPIRED"  # an order whose task never showed up, dropped
    CONTROL_UNTRUSTED = "CONTROL_UNTRUSTED"  # an order from someone not allowed to give it
    # replies to waiting tasks
    REPLY_INTERPRETED = "REPLY_INTERPRETED"
    CLARIFICATION_ASKED = "CLARIFICATION_ASKED"
    # slots (`max_parallel`): several tasks at once
    RUNNING_IN_SLOT = "RUNNING_IN_SLOT"  # a candidate runs in another slot; passed over
    SLOTS_FULL = "SLOTS_FULL"  # every slot runs a task: nothing new starts
    DAILY_CAP_HELD = "DAILY_CAP_HELD"  # the running tasks at their caps would pass the daily cap
    USAGE_LIMIT_HELD = "USAGE_LIMIT_HELD"  # a slot's agent hit its usage limit: all slots wait
    IN_PLACE_WAITED = "IN_PLACE_WAITED"  # a task edits in place: it waited to run alone


class Order(StrEnum):
    """What a control order asks. `stop` and `cancel` are the same order for worker."""

    STOP = "stop"
    CANCEL = "cancel"
    PAUSE = "pause"
    RESUME = "resume"

    @property
    def ends_task(self) -> bool:
        return self in (Order.STOP, Order.CANCEL)


ALL_TASKS = "*"


# An order, a paused flow and a stale item are never compared nor hashed (they are matched by
# their fields and kept in lists, or in dicts by task id): NamedTuples too, whose `ref` would
# take part in a comparison if there were one.
class ControlOrder(NamedTuple):
    """A stop/cancel/pause/resume order for one task (or `*`), from wherever it came."""

    id: str
    order: Order
    task_id: str
    origin: str  # cli | inbox | intercom | github | reply
    reason: str = ""
    sender: str = ""
    at: float = 0.0  # epoch seconds
    trusted: bool = True  # decided at the edge (observe): may this sender give this order?
    ref: Any = None  # its file, for consuming it

    def targets(self, task_id: str) -> bool:
        return self.task_id in (task_id, ALL_TASKS)


class ReadyWait(NamedTuple):
    """A wait state whose condition is met, with what the agent waited for."""

    task: Task
    waiting_since: float  # epoch seconds; the oldest ready wait is served first
    answer: str = ""  # the approval note, the reply's body, the decision
    ref: Any = None  # the wait-state store's handle (its file)


class WaitingFlow(NamedTuple):
    """A paused flow: a wait state whose condition is not met yet."""

    task: Task
    resume_brief: str = ""
    last_active_at: float | None = None
    ref: Any = None  # the wait-state file


class StaleItem(NamedTuple):
    """Something a dead run left behind (a claim, a worktree), found by its own rule."""

    kind: str  # claim | worktree
    id: str
    rule: str  # LEASE_EXPIRED | CLAIM_GONE | ...
    holds_work: bool = False  # uncommitted changes, unreported results: never deleted
    ref: Any = None  # a worktree's path


class ReplySignal(NamedTuple):
    """A reply to a waiting or running task, classified (see `worker.kernel.replies`)."""

    reply_id: str
    task_id: str
    signal: str  # a `replies.Signal` value
    confidence: float
    acts: bool  # above the signal's threshold
    sender: str = ""
    trusted: bool = True  # may resume (approve) the task
    may_stop: bool = True  # may stop, cancel or pause it (`control.may_order`)


class TaskEnd(NamedTuple):
    """A task ended without an agent in this run (its pull request merged or closed): what
    the run records of it."""

    task_id: str
    source: str
    outcome: str
    reason: str
    branch: str | None = None


# Never compared (and never hashable: a source's `Listing` is not), so no generated `__eq__`
# and `__hash__`: two fewer `exec`s at every start.
@dataclass(frozen=True, eq=False)
class Snapshot:
    """Everything `decide` looks at: the sources' listings, the waits, the orders, the
    paused flows, the stale leftovers and the replies."""

    listings: tuple[Listing, ...] = ()  # in source priority order
    ready_waits: tuple[ReadyWait, ...] = ()
    pending_waits: int = 0
    forced: Task | None = None  # `--task-id`
    excluded: frozenset[str] = frozenset()  # ids lost to another run this turn
    notes: tuple[str, ...] = ()  # reason codes observed before deciding (e.g. LEASE_EXPIRED)
    ended: tuple[TaskEnd, ...] = ()  # tasks phase 0 ended (their pull request merged, closed)
    seen: tuple[str, ...] = ()  # what phase 0's looks at pull requests saw, in words
    # the kernel's own observations
    controls: tuple[ControlOrder, ...] = ()
    running: Task | None = None  # a task running now (the stop watcher's view)
    # Slots (`max_parallel`): the tasks other slots run now, how many may run at once, and the
    # shared limit (a Reason) that holds every new task back for now.
    others_running: frozenset[str] = frozenset()
    slots: int = 1
    held: str | None = None
    waiting: tuple[WaitingFlow, ...] = ()  # wait states not ready (paused flows)
    paused: frozenset[str] = frozenset()  # task ids paused by an order (or `*`)
    stale: tuple[StaleItem, ...] = ()
    signals: tuple[ReplySignal, ...] = ()
    now: float = 0.0  # epoch seconds, for the orders' time to live
    control_ttl_s: float = 24 * 3600.0


class Act(StrEnum):
    """The closed list of things a decision asks the edges to do."""

    STOP_RUNNING = "stop_running"  # end the agent's process group, keep its work
    PAUSE_RUNNING = "pause_running"  # the same, and save a wait state to resume from
    CANCEL_WAIT = "cancel_wait"  # move the wait state aside, tell the source
    DROP_QUEUED = "drop_queued"  # take the task out of its queue, tell the source
    PAUSE = "pause"  # remember the task is paused (its candidates are passed over)
    RESUME = "resume"  # forget a pause
    CONSUME_ORDER = "consume_order"  # the order is done (or expired, or refused)
    CLEAN = "clean"  # a stale item holding nothing: remove or release it
    KEEP_WORK = "keep_work"  # a stale item holding work: commit it to its branch or keep it
    CLARIFY = "clarify"  # ask the sender what they meant
    NOTE_REPLY = "note_reply"  # a reply was read and needs nothing done


@dataclass(frozen=True)
class Action:
    """One thing a decision asks the edges to do (`Act`), for one task, with its reason."""

    act: Act
    task_id: str
    reason: str  # a Reason
    order_id: str | None = None
    detail: str = ""
    ref: Any = field(default=None, compare=False, hash=False)


class PlanEntry(NamedTuple):
    """One flow in the plan: paused or queued, with how to resume it."""

    task_id: str
    kind: str
    priority: Priority
    resume_brief: str
    last_active_at: float | None


@dataclass(frozen=True)
class Decision:
    """The task to run (or none), why, and the actions and plan that come with it."""

    task: Task | None
    source: str | None
    reason_codes: tuple[str, ...]
    candidates: dict[str, int] = field(default_factory=dict)
    wait: ReadyWait | None = None
    priority: Priority | None = None
    actions: tuple[Action, ...] = ()
    paused: tuple[PlanEntry, ...] = ()
    queued: tuple[PlanEntry, ...] = ()
    signals: tuple[str, ...] = ()  # "SIGNAL@task:0.80" for each classified reply
    flows: dict[str, int] = field(default_factory=dict)  # presence flags per flow kind

    @property
    def idle(self) -> bool:
        return self.task is None

    def event(self) -> dict[str, Any]:
        """The kernel's part of the decision event (JSON-ready)."""
        return {
            "priority": self.priority.name.lower() if self.priority is not None else None,
            "actions": [
                {
                    "act": a.act.value,
                    "task": a.task_id,
                    "reason": a.reason,
                    **({"order": a.order_id} if a.order_id else {}),
                    **({"detail": a.detail} if a.detail else {}),
                }
                for a in self.actions
            ],
            "paused": [_entry(e) for e in self.paused][:50],
            "queued": [_entry(e) for e in self.queued][:50],
            "signals": list(self.signals),
            "flows": dict(self.flows),
        }


def _entry(entry: PlanEntry) -> dict[str, Any]:
    return {
        "task": entry.task_id,
        "kind": entry.kind,
        "priority": entry.priority.name.lower(),
        "resume_brief": entry.resume_brief,
        "last_active_at": entry.last_active_at,
    }
