"""The kernel with slots (`max_parallel`): a decision is one slot's turn; at most `slots`
tasks run at once, a task another slot runs is never chosen again, and a shared limit holds
every new task back while the orders still act."""

from __future__ import annotations

import pytest

from tests.kernel_helpers import NOW, listing, order, ready
from worker.kernel.decide import decide
from worker.kernel.invariants import InvariantViolation, check
from worker.kernel.model import Act, Decision, Reason, Snapshot
from worker.models import Task


def _snap(**fields: object) -> Snapshot:
    return Snapshot(listings=(listing("inbox", "a", "b", "c"),), now=NOW, **fields)  # type: ignore[arg-type]


def test_a_task_another_slot_runs_is_passed_over_for_the_next() -> None:
    decision = decide(_snap(others_running=frozenset({"a"}), slots=3))
    assert decision.task is not None and decision.task.id == "b"
    assert Reason.RUNNING_IN_SLOT in decision.reason_codes


def test_a_ready_wait_another_slot_resumes_is_not_resumed_twice() -> None:
    snap = Snapshot(ready_waits=(ready("w"),), others_running=frozenset({"w"}), slots=2, now=NOW)
    assert decide(snap).task is None


def test_with_every_slot_busy_nothing_starts_but_a_cancel_still_acts() -> None:
    snap = _snap(others_running=frozenset({"x", "y"}), slots=2, controls=(order("c"),))
    decision = decide(snap)
    assert decision.task is None
    assert Reason.SLOTS_FULL in decision.reason_codes
    assert (Act.DROP_QUEUED, "c") in {(a.act, a.task_id) for a in decision.actions}


@pytest.mark.parametrize("held", [Reason.DAILY_CAP_HELD, Reason.USAGE_LIMIT_HELD])
def test_a_shared_limit_holds_every_new_task_back_and_says_which(held: Reason) -> None:
    decision = decide(_snap(slots=4, held=held.value))
    assert decision.task is None and held.value in decision.reason_codes


def test_one_slot_and_nothing_else_running_is_todays_decision() -> None:
    assert decide(_snap()).task == decide(_snap(slots=1)).task


def test_the_invariants_refuse_a_task_another_slot_runs_and_a_start_past_the_slots() -> None:
    chosen = Decision(
        task=Task(id="a", source="inbox", title="t"),
        source="inbox",
        reason_codes=(),
        candidates={},
        priority=decide(_snap()).priority,
    )
    with pytest.raises(InvariantViolation, match="one slot per task"):
        check(_snap(others_running=frozenset({"a"}), slots=3), chosen)
    with pytest.raises(InvariantViolation, match="at most max_parallel"):
        check(_snap(others_running=frozenset({"x", "y"}), slots=2), chosen)
    with pytest.raises(InvariantViolation, match="shared limits"):
        check(_snap(slots=2, held="DAILY_CAP_HELD"), chosen)
