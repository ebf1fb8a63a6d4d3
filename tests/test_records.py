"""The records built as NamedTuples for start-up (one `eval` per class instead of a frozen
dataclass's six `exec`s) keep what the code asks of them: equal when every field is equal,
hashed alike, immutable, printed as `Name(field=value, ...)`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from worker.kernel.model import (
    ControlOrder,
    Order,
    PlanEntry,
    Priority,
    ReadyWait,
    ReplySignal,
    StaleItem,
    WaitingFlow,
)
from worker.kernel.registry import BY_NAME, Flow, FlowKind
from worker.models import InfraFailure, InfraKind, StatusBlock, Task
from worker.modes import ModeSet, load_modes

TASK = Task("t1", "inbox", "a title")

RECORDS: list[tuple[type, dict[str, Any]]] = [
    (ReadyWait, {"task": TASK, "waiting_since": 5.0, "answer": "yes", "ref": Path("/w/t1.json")}),
    (
        ReplySignal,
        {
            "reply_id": "r1",
            "task_id": "t1",
            "signal": "FLOW_WANTS_RESUME",
            "confidence": 0.9,
            "acts": True,
            "sender": "alice",
        },
    ),
    (
        PlanEntry,
        {
            "task_id": "t1",
            "kind": "waiting",
            "priority": Priority.HARD_BLOCKER,
            "resume_brief": "resume t1",
            "last_active_at": None,
        },
    ),
    (Flow, {"kind": BY_NAME["inbox"], "task_id": "t1", "pending": True, "task": TASK}),
    (
        ControlOrder,
        {"id": "o1", "order": Order.STOP, "task_id": "t1", "origin": "cli", "at": 5.0},
    ),
    (WaitingFlow, {"task": TASK, "resume_brief": "resume t1", "ref": Path("/w/t1.json")}),
    (StaleItem, {"kind": "worktree", "id": "t1", "rule": "CLAIM_GONE", "holds_work": True}),
    (
        InfraFailure,
        {"kind": InfraKind.AUTH, "message": "Invalid API key", "http_status": 401},
    ),
    (StatusBlock, {"status": "wait", "reason": "needs approval", "wait_for": "approval"}),
]


@pytest.mark.parametrize(("record", "values"), RECORDS, ids=[r.__name__ for r, _ in RECORDS])
def test_a_record_compares_hashes_and_prints_field_by_field(
    record: type, values: dict[str, Any]
) -> None:
    one, same = record(**values), record(**dict(values))
    assert one == same and hash(one) == hash(same)
    first = next(iter(values))
    other = record(**{**values, first: "something else"})
    assert one != other
    assert repr(one).startswith(f"{record.__name__}({first}={values[first]!r}, ")
    with pytest.raises(AttributeError):
        setattr(one, first, "changed")


def test_the_flow_kinds_and_the_modes_stay_read_only() -> None:
    """The registry's kinds and the loaded modes are shared by every decision and task of a
    process: neither can be changed in place."""
    kind = BY_NAME["inbox"]
    assert isinstance(kind, FlowKind) and kind.priority is Priority.FOREGROUND
    with pytest.raises(AttributeError):
        kind.priority = Priority.SAFETY  # type: ignore[misc]
    modes = load_modes(None)
    assert isinstance(modes, ModeSet) and modes.source == "embedded defaults"
    with pytest.raises(AttributeError):
        modes.source = "elsewhere"  # type: ignore[misc]
    assert modes == ModeSet(dict(modes.modes), "embedded defaults")
