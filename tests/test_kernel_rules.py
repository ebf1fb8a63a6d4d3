"""One test per scheduling rule of the kernel (pure: snapshots in, decisions out)."""

from __future__ import annotations

import json

import pytest

from tests.kernel_helpers import (
    NOW,
    listing,
    order,
    ready,
    reply,
    snap,
    stale,
    task,
    waiting,
)
from worker.kernel import invariants
from worker.kernel.model import Act, Decision, Order, Priority, Reason, Snapshot
from worker.kernel.scheduling import decide


def acts(decision: Decision) -> set[tuple[str, str]]:
    return {(a.act.value, a.task_id) for a in decision.actions}


# -- priority classes ---------------------------------------------------------------------------
def test_classes_are_strictly_ordered() -> None:
    """hard blocker (ready wait) > foreground (inbox) > pending (GitHub) > opportunistic."""
    full = snap(
        listings=(listing("inbox", "i1"), listing("github", "g1"), listing("fallback", "f1")),
        ready_waits=(ready("w1"),),
    )
    d = decide(full)
    assert (d.task.id, d.priority) == ("w1", Priority.HARD_BLOCKER)  # type: ignore[union-attr]
    assert d.reason_codes[:3] == (
        Reason.WAIT_STATE_RESUMED,
        Reason.HARD_BLOCKER_ACTIVE,
        Reason.RESUME_PREVIOUS_FLOW,
    )
    d = decide(snap(listings=full.listings))
    assert (d.task.id, d.reason_codes[1]) == ("i1", Reason.FOREGROUND_TASK)  # type: ignore[union-attr]
    d = decide(snap(listings=full.listings[1:]))
    assert (d.task.id, d.reason_codes[1]) == ("g1", Reason.PENDING_NUDGE)  # type: ignore[union-attr]
    d = decide(snap(listings=full.listings[2:]))
    assert (d.task.id, d.reason_codes[1]) == ("f1", Reason.OPPORTUNISTIC_TASK)  # type: ignore[union-attr]


def test_class_beats_listing_order() -> None:
    """A source listed first but of a lower class does not win."""
    d = decide(snap(listings=(listing("fallback", "f1"), listing("inbox", "i1"))))
    assert d.task.id == "i1"  # type: ignore[union-attr]


def test_forced_task_comes_before_ready_waits() -> None:
    d = decide(snap(forced=task("x"), ready_waits=(ready("w1"),)))
    assert d.task.id == "x" and d.reason_codes[0] == Reason.TASK_ID_REQUESTED  # type: ignore[union-attr]


def test_oldest_ready_wait_first() -> None:
    d = decide(snap(ready_waits=(ready("new", NOW - 1), ready("old", NOW - 999))))
    assert d.task.id == "old" and d.wait is not None  # type: ignore[union-attr]
    assert [e.task_id for e in d.queued] == ["new"]


def test_running_task_holds_the_turn() -> None:
    """A running task is a hard blocker: without an order nothing replaces it."""
    d = decide(snap(running=task("r"), listings=(listing("inbox", "i1"),)))
    assert d.task.id == "r" and d.reason_codes[0] == Reason.HARD_BLOCKER_ACTIVE  # type: ignore[union-attr]


def test_idle_with_pending_waits() -> None:
    d = decide(snap(pending_waits=2))
    assert d.idle and d.reason_codes == (Reason.NOTHING_TO_DO, Reason.WAITS_PENDING)


def test_notes_kept() -> None:
    d = decide(
        snap(
            listings=(listing("inbox", "a", "b"),),
            excluded=frozenset({"a"}),
            notes=(Reason.LEASE_EXPIRED,),
        )
    )
    assert d.task.id == "b"  # type: ignore[union-attr]
    assert {Reason.CLAIM_LOST, Reason.LEASE_EXPIRED} <= set(d.reason_codes)


# -- control orders (safety) --------------------------------------------------------------------
def test_stop_order_stops_the_running_task() -> None:
    d = decide(snap(running=task("r"), controls=(order("r", Order.STOP),)))
    assert d.idle and ("stop_running", "r") in acts(d)
    assert d.priority is Priority.SAFETY
    assert {Reason.SAFETY_OVERRIDE, Reason.CANCELLED_ON_STOP} <= set(d.reason_codes)


def test_cancel_order_cancels_a_ready_wait_and_serves_the_next() -> None:
    d = decide(
        snap(
            ready_waits=(ready("w1"),), listings=(listing("inbox", "i1"),), controls=(order("w1"),)
        )
    )
    assert ("cancel_wait", "w1") in acts(d) and d.task.id == "i1"  # type: ignore[union-attr]
    assert Reason.WAIT_CANCELLED in d.reason_codes and Reason.SAFETY_OVERRIDE in d.reason_codes


def test_cancel_order_cancels_a_waiting_flow() -> None:
    d = decide(snap(waiting=(waiting("w2"),), controls=(order("w2"),)))
    assert ("cancel_wait", "w2") in acts(d) and not d.paused


def test_cancel_order_drops_a_queued_task() -> None:
    d = decide(snap(listings=(listing("github", "g1", "g2"),), controls=(order("g1"),)))
    assert ("drop_queued", "g1") in acts(d) and d.task.id == "g2"  # type: ignore[union-attr]
    assert ("consume_order", "g1") in acts(d)
    assert Reason.QUEUED_DROPPED in d.reason_codes


def test_cancel_order_preempts_the_forced_task() -> None:
    d = decide(snap(forced=task("x"), controls=(order("x"),)))
    assert d.idle and ("drop_queued", "x") in acts(d)


def test_pause_order_pauses_instead() -> None:
    d = decide(snap(listings=(listing("inbox", "i1", "i2"),), controls=(order("i1", Order.PAUSE),)))
    assert ("pause", "i1") in acts(d) and d.task.id == "i2"  # type: ignore[union-attr]
    assert not any(a.act is Act.DROP_QUEUED for a in d.actions)
    later = decide(snap(listings=(listing("inbox", "i1"),), paused=frozenset({"i1"})))
    assert later.idle and Reason.TASK_PAUSED in later.reason_codes
    assert [e.task_id for e in later.paused] == ["i1"]


def test_pause_order_on_the_running_task() -> None:
    d = decide(snap(running=task("r"), controls=(order("r", Order.PAUSE),)))
    assert ("pause_running", "r") in acts(d) and d.idle


def test_resume_order_clears_a_pause() -> None:
    d = decide(
        snap(
            listings=(listing("inbox", "i1"),),
            paused=frozenset({"i1"}),
            controls=(order("i1", Order.RESUME),),
        )
    )
    assert ("resume", "i1") in acts(d) and d.task.id == "i1"  # type: ignore[union-attr]
    assert Reason.RESUMED_ON_ORDER in d.reason_codes


def test_resume_order_brings_back_a_waiting_flow() -> None:
    d = decide(
        snap(
            waiting=(waiting("w1"),),
            listings=(listing("inbox", "i1"),),
            controls=(order("w1", Order.RESUME),),
        )
    )
    assert d.task.id == "w1" and d.wait is not None  # type: ignore[union-attr]
    assert "resumed by a cli order" in d.wait.answer
    assert Reason.RESUME_PREVIOUS_FLOW in d.reason_codes


def test_stop_everything_halts_this_turn() -> None:
    d = decide(snap(running=task("r"), controls=(order("*", Order.STOP),)))
    assert ("stop_running", "r") in acts(d) and d.idle
    d = decide(snap(listings=(listing("inbox", "i1"),), controls=(order("*", Order.STOP),)))
    assert d.idle and Reason.HALTED in d.reason_codes


def test_pause_everything_holds_new_work_until_resumed() -> None:
    d = decide(snap(listings=(listing("inbox", "i1"),), paused=frozenset({"*"})))
    assert d.idle and Reason.HALTED in d.reason_codes
    d = decide(
        snap(
            listings=(listing("inbox", "i1"),),
            paused=frozenset({"*"}),
            controls=(order("*", Order.RESUME),),
        )
    )
    assert d.task.id == "i1"  # type: ignore[union-attr]


def test_untrusted_order_is_refused() -> None:
    d = decide(snap(listings=(listing("inbox", "i1"),), controls=(order("i1", trusted=False),)))
    assert d.task.id == "i1"  # type: ignore[union-attr]
    assert (
        Reason.CONTROL_UNTRUSTED in d.reason_codes and Reason.SAFETY_OVERRIDE not in d.reason_codes
    )


def test_order_for_an_unknown_task_waits_then_expires() -> None:
    fresh = decide(snap(controls=(order("ghost", at=NOW - 60),)))
    assert not fresh.actions
    old = decide(snap(controls=(order("ghost", at=NOW - 2 * 86400),)))
    assert [(a.act, a.reason) for a in old.actions] == [(Act.CONSUME_ORDER, Reason.CONTROL_EXPIRED)]


def test_control_message_is_not_a_task() -> None:
    ctl = order("i9", oid="ctl-msg", origin="inbox")
    d = decide(snap(listings=(listing("inbox", "ctl-msg", "i1"),), controls=(ctl,)))
    assert d.task.id == "i1" and Reason.CONTROL_NOT_TASK in d.reason_codes  # type: ignore[union-attr]


# -- staleness ----------------------------------------------------------------------------------
def test_stale_items_cleaned_but_work_kept() -> None:
    d = decide(
        snap(stale=(stale("c1"), stale("wt-a", "worktree", work=True), stale("wt-b", "worktree")))
    )
    assert {(a.act, a.task_id) for a in d.actions} == {
        (Act.CLEAN, "c1"),
        (Act.KEEP_WORK, "wt-a"),
        (Act.CLEAN, "wt-b"),
    }
    assert Reason.STALE_CLEANUP in d.reason_codes


def test_stale_claim_of_the_chosen_task_is_left_for_its_new_claim() -> None:
    d = decide(snap(ready_waits=(ready("w1"),), stale=(stale("w1"),)))
    assert d.task.id == "w1" and not d.actions  # type: ignore[union-attr]


# -- replies ------------------------------------------------------------------------------------
def test_clear_stop_reply_cancels_the_waiting_task() -> None:
    d = decide(
        snap(waiting=(waiting("w1"),), signals=(reply("w1", "INTERRUPT_EXPLICIT_STOP", 0.9, True),))
    )
    assert ("cancel_wait", "w1") in acts(d) and ("note_reply", "w1") in acts(d)
    assert d.signals == ("INTERRUPT_EXPLICIT_STOP@w1:0.90",)


def test_unclear_reply_asks_for_clarification() -> None:
    d = decide(
        snap(
            waiting=(waiting("w1"),), signals=(reply("w1", "INTERRUPT_EXPLICIT_STOP", 0.5, False),)
        )
    )
    assert acts(d) == {("clarify", "w1")} and Reason.CLARIFICATION_ASKED in d.reason_codes


def test_resume_reply_from_an_untrusted_sender_resumes_nothing() -> None:
    d = decide(
        snap(
            waiting=(waiting("w1"),),
            signals=(reply("w1", "FLOW_WANTS_RESUME", 0.8, True, trusted=False),),
        )
    )
    assert d.idle and acts(d) == {("note_reply", "w1")}


# -- the plan and the event ---------------------------------------------------------------------
def test_paused_flows_carry_a_resume_brief_and_last_active_at() -> None:
    d = decide(snap(waiting=(waiting("w1", brief=""), waiting("w2", "review", last=None))))
    assert [(e.task_id, bool(e.resume_brief), e.last_active_at is not None) for e in d.paused] == [
        ("w1", True, True),
        ("w2", True, True),
    ]


def test_event_is_json() -> None:
    d = decide(
        snap(
            listings=(listing("inbox", "i1", "i2"),),
            waiting=(waiting("w"),),
            controls=(order("i2"),),
        )
    )
    event = json.loads(json.dumps(d.event()))
    assert event["priority"] == "foreground"
    assert event["flows"] == {"control": 1, "waiting": 1, "inbox": 2}
    assert {
        "act": "drop_queued",
        "task": "i2",
        "reason": "QUEUED_DROPPED",
        "order": "o-cancel-i2",
        "detail": "cancel by cli: because",
    } in event["actions"]


def test_invariant_check_catches_a_bad_decision() -> None:
    """The assertions inside decide are real: a decision that ignores a stop is refused."""
    s = Snapshot(running=task("r"), controls=(order("r", Order.STOP),), now=NOW)
    bad = Decision(
        task("r"), "inbox", (Reason.HARD_BLOCKER_ACTIVE,), priority=Priority.HARD_BLOCKER
    )
    with pytest.raises(invariants.InvariantViolation, match="safety preempts"):
        invariants.check(s, bad)
    unknown = Decision(None, None, ("MADE_UP",))
    with pytest.raises(invariants.InvariantViolation, match="closed reason codes"):
        invariants.check(Snapshot(), unknown)


def test_stop_wins_over_pause_and_a_later_resume() -> None:
    """pause, stop, resume of the running task in one turn: the stop holds."""
    d = decide(
        snap(
            running=task("a"),
            controls=(
                order("a", Order.PAUSE, oid="1", at=NOW - 3),
                order("a", Order.STOP, oid="2", at=NOW - 2),
                order("a", Order.RESUME, oid="3", at=NOW - 1),
            ),
        )
    )
    assert d.idle and acts(d) == {("stop_running", "a"), ("consume_order", "a")}


def test_pause_then_resume_of_the_running_task_lets_it_go_on() -> None:
    d = decide(
        snap(
            running=task("a"),
            controls=(
                order("a", Order.PAUSE, oid="1", at=NOW - 3),
                order("a", Order.RESUME, oid="2", at=NOW - 1),
            ),
        )
    )
    assert d.task.id == "a" and not any(a.act is Act.PAUSE_RUNNING for a in d.actions)  # type: ignore[union-attr]
