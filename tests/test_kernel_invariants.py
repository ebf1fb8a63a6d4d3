"""The kernel's invariants over thousands of generated snapshots and event sequences.

`decide` checks its invariants itself (an InvariantViolation fails the example); the tests
add checks written independently of the kernel's code, and a sequence model: orders, tasks and
replies arrive turn after turn, and a cancelled task never runs again.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.kernel_helpers import NOW, order, ready, reply, stale, task, waiting
from worker.kernel.model import Act, Order, Snapshot
from worker.kernel.replies import Signal
from worker.kernel.scheduling import decide
from worker.sources.base import Listing

IDS = st.sampled_from(["a", "b", "c", "d", "e", "f"])
SOURCES = st.sampled_from(["inbox", "github", "fallback", "other"])


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    listings = tuple(
        Listing(source, [task(i, source) for i in draw(st.lists(IDS, max_size=3, unique=True))])
        for source in draw(st.lists(SOURCES, max_size=4, unique=True))
    )
    controls = tuple(
        order(
            draw(st.one_of(IDS, st.just("*"), st.just("zz"))),
            draw(st.sampled_from(Order)),
            trusted=draw(st.booleans()),
            at=NOW - draw(st.sampled_from([5, 3600, 200_000])),
            oid=f"o{n}",
            origin=draw(st.sampled_from(["cli", "inbox"])),
        )
        for n in range(draw(st.integers(0, 3)))
    )
    signals = tuple(
        reply(
            draw(IDS),
            draw(st.sampled_from(list(Signal))),
            c,
            c >= 0.6,
            trusted=draw(st.booleans()),
            may_stop=draw(st.booleans()),
        )
        for c in draw(st.lists(st.sampled_from([0.3, 0.55, 0.62, 0.7, 0.9]), max_size=2))
    )
    return Snapshot(
        listings=listings,
        ready_waits=tuple(
            ready(i, NOW - n) for n, i in enumerate(draw(st.lists(IDS, max_size=3, unique=True)))
        ),
        waiting=tuple(
            waiting(i, draw(st.sampled_from(["", "brief"])), draw(st.sampled_from([None, NOW - 7])))
            for i in draw(st.lists(IDS, max_size=2, unique=True))
        ),
        pending_waits=draw(st.integers(0, 2)),
        forced=draw(st.one_of(st.none(), IDS.map(task))),
        running=draw(st.one_of(st.none(), IDS.map(task))),
        excluded=frozenset(draw(st.lists(IDS, max_size=2))),
        others_running=frozenset(draw(st.lists(IDS, max_size=3))),  # max_parallel's slots
        slots=draw(st.integers(1, 4)),
        held=draw(st.sampled_from([None, "DAILY_CAP_HELD", "USAGE_LIMIT_HELD"])),
        paused=frozenset(draw(st.lists(st.one_of(IDS, st.just("*")), max_size=2))),
        controls=controls,
        stale=tuple(
            stale(i, kind, work)
            for i, kind, work in draw(
                st.lists(
                    st.tuples(IDS, st.sampled_from(["claim", "worktree"]), st.booleans()),
                    max_size=2,
                )
            )
        ),
        signals=signals,
        now=NOW,
    )


@settings(max_examples=1000, deadline=None)
@given(snapshots())
def test_every_generated_snapshot_keeps_the_invariants(snap: Snapshot) -> None:
    decision = decide(snap)  # raises InvariantViolation on a broken invariant
    assert decide(snap) == decision  # deterministic
    chosen = decision.task.id if decision.task else None
    stops = [o for o in snap.controls if o.trusted and o.order.ends_task]
    # safety preempts: nothing an order ends is chosen
    for stop in stops:
        if stop.task_id != "*":
            assert chosen != stop.task_id
    # no task stays running after an explicit stop
    if snap.running is not None and any(o.targets(snap.running.id) for o in stops):
        assert chosen != snap.running.id
        assert any(a.act is Act.STOP_RUNNING for a in decision.actions)
    # at most one switch: one stop of the running task at most, one foreground
    assert sum(a.act in (Act.STOP_RUNNING, Act.PAUSE_RUNNING) for a in decision.actions) <= 1
    assert chosen not in {e.task_id for e in (*decision.paused, *decision.queued)}
    # nothing holding work is cleaned
    assert not any(a.act is Act.CLEAN and a.ref.holds_work for a in decision.actions)
    # every paused flow can be resumed
    assert all(e.resume_brief and e.last_active_at is not None for e in decision.paused)


@st.composite
def events(draw: st.DrawFn) -> list[tuple[str, str]]:
    kinds = st.sampled_from(
        ["arrive", "arrive", "cancel", "pause", "resume", "finish", "stop_reply"]
    )
    return draw(st.lists(st.tuples(kinds, IDS), min_size=1, max_size=10))


@settings(max_examples=500, deadline=None)
@given(events())
def test_sequences_of_events(sequence: list[tuple[str, str]]) -> None:
    """A small world driven turn by turn through `decide` and the effects of its actions:
    one task runs at a time, a cancelled task never runs again, a paused one not until
    resumed."""
    queued: list[str] = []
    waits: list[str] = []
    paused: set[str] = set()
    cancelled: set[str] = set()
    running: str | None = None
    for step, (kind, tid) in enumerate(sequence):
        controls, signals = (), ()
        if kind == "arrive" and tid not in queued and tid != running and tid not in cancelled:
            queued.append(tid)
        elif kind in ("cancel", "pause", "resume"):
            controls = (order(tid, Order(kind), oid=f"o{step}", at=NOW + step),)
        elif kind == "stop_reply" and tid in waits:
            signals = (reply(tid, "INTERRUPT_EXPLICIT_STOP", 0.9, True),)
        elif kind == "finish" and running is not None:
            waits.append(running) if tid in "abc" else None
            running = None
        snap = Snapshot(
            listings=(Listing("inbox", [task(i) for i in queued]),),
            waiting=tuple(waiting(w) for w in waits),
            running=task(running) if running else None,
            paused=frozenset(paused),
            controls=controls,
            signals=signals,
            now=NOW + step,
        )
        decision = decide(snap)
        for action in decision.actions:
            if action.act in (Act.STOP_RUNNING, Act.CANCEL_WAIT, Act.DROP_QUEUED):
                cancelled.add(action.task_id)
                queued = [q for q in queued if q != action.task_id]
                waits = [w for w in waits if w != action.task_id]
                running = None if running == action.task_id else running
            elif action.act is Act.PAUSE_RUNNING:
                waits.append(action.task_id)
                running = None
            elif action.act is Act.PAUSE:
                paused.add(action.task_id)
            elif action.act is Act.RESUME:
                paused.discard(action.task_id)
        if decision.task is not None and decision.task.id != running:
            assert running is None, "a second task started while one runs"
            started = decision.task.id
            assert started not in cancelled and started not in paused
            running = started
            queued = [q for q in queued if q != started]
            waits = [w for w in waits if w != started]
        assert running is None or running not in cancelled


@settings(max_examples=300, deadline=None)
@given(snapshots(), st.sampled_from(list(Order)), IDS)
def test_an_order_added_never_makes_its_task_run(snap: Snapshot, what: Order, tid: str) -> None:
    """Adding a trusted stop, cancel or pause for a task never leaves that task chosen."""
    extra = order(tid, what, oid="extra", at=NOW)
    decision = decide(replace(snap, controls=(*snap.controls, extra)))
    if what is not Order.RESUME:
        assert decision.task is None or decision.task.id != tid
