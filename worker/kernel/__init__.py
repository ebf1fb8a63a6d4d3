"""The scheduling kernel: every flow observed, every decision deterministic and explained.

`decide` is pure (model, registry, decide, invariants, replies); `observe` reads the world
into a snapshot, `effects` carries out a decision's actions, `watcher` obeys stop orders
while a task runs, `explain` turns a decision event into words.
"""

from worker.kernel.decide import decide
from worker.kernel.invariants import InvariantViolation
from worker.kernel.model import (
    Act,
    Action,
    ControlOrder,
    Decision,
    Order,
    Priority,
    ReadyWait,
    Reason,
    Snapshot,
    WaitingFlow,
)

__all__ = [
    "Act",
    "Action",
    "ControlOrder",
    "Decision",
    "InvariantViolation",
    "Order",
    "Priority",
    "ReadyWait",
    "Reason",
    "Snapshot",
    "WaitingFlow",
    "decide",
]
