"""decide(snapshot) -> Decision: the pure choice of what this run does.

The façade of the scheduling kernel (`worker.kernel`): priority classes (safety > hard
blocker > foreground > pending > opportunistic), control orders that preempt everything,
staleness, replies read into closed signals, and invariants checked on every decision. Every
decision carries reason codes from the closed list `Reason`, and the count of candidates each
source offered.
"""

from __future__ import annotations

from worker.kernel.decide import decide
from worker.kernel.model import (
    Action,
    ControlOrder,
    Decision,
    Priority,
    ReadyWait,
    Reason,
    Snapshot,
    WaitingFlow,
)

__all__ = [
    "Action",
    "ControlOrder",
    "Decision",
    "Priority",
    "ReadyWait",
    "Reason",
    "Snapshot",
    "WaitingFlow",
    "decide",
]
