"""The directives queue: order in the prompt, aging, the cleanup cap, recorded fates."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.reviewer_kit import finished, open_store, review_settings
from worker.models import Outcome, Task
from worker.review import db
from worker.review import directives as queue
from worker.review.hooks import after_task, prompt_sections, task_sections


def _add(store, description, *, type="functional", priority="normal", seq=0, cap=10):  # type: ignore[no-untyped-def]
    return queue.add(
        store,
        type=type,
        source="style",
        description=description,
        priority=priority,
        seq=seq,
        cleanup_cap=cap,
    )


def test_review_migrations_create_their_tables_on_an_empty_database(tmp_path: Path) -> None:
    settings = review_settings(tmp_path / "ws")
    with open_store(settings) as store:
        db.ensure(store)
        db.ensure(store)  # a second open applies nothing twice
        tables = {row[0] for row in store.db.execute("SELECT name FROM sqlite_master")}
        versions = store.db.execute(
            "SELECT version FROM migrations WHERE component = 'review'"
        ).fetchall()
    assert {
        "directives",
        "review_runs",
        "review_reviewers",
        "review_counters",
        "review_tasks",
        "review_shown",
        "knowledge_uses",
    } <= tables
    assert [row[0] for row in versions] == [1]


def test_prompt_lists_directives_critical_then_functional_then_cleanup(tmp_path: Path) -> None:
    """Critical before the task's own work, functional before planned work, cleanup after;
    within a group by priority, then oldest first."""
    settings = review_settings(tmp_path / "ws")
    with open_store(settings) as store:
        db.ensure(store)
        _add(store, "tidy imports", type="cleanup", priority="low")
        _add(store, "low functional", priority="low")
        _add(store, "normal functional")
        _add(store, "stop writing to the shared file", priority="critical")
        sections = prompt_sections(settings, store, Task("t1", "inbox", "something"))
    assert len(sections) == 1
    text = sections[0]
    assert text.startswith("## ACTIVE DIRECTIVES")
    assert "MUST be dealt with: address it" in text
    order = [
        text.index(s)
        for s in (
            "stop writing to the shared file",
            "normal functional",
            "low functional",
            "tidy imports",
        )
    ]
    assert order == sorted(order)
    assert text.index("### Critical") < text.index("### Functional") < text.index("### Cleanup")
    assert "DIRECTIVE D<id>: addressed|explained|escalated" in text


def test_directive_not_picked_up_ages_out_after_15_tasks(tmp_path: Path) -> None:
    settings = review_settings(tmp_path / "ws")
    with open_store(settings) as store:
        db.ensure(store)
        first = _add(store, "refactor the loop")
        for n in range(14):
            after_task(settings, store, finished(f"t{n}"))
        assert queue.get(store, first).state == "pending"  # type: ignore[union-attr]
        after_task(settings, store, finished("t14"))
        aged = queue.get(store, first)
    assert aged is not None and aged.state == "aged_out"
    assert aged.fate_note == "not picked up in 15 tasks"


def test_cleanup_cap_drops_the_oldest_cleanup_directive(tmp_path: Path) -> None:
    settings = review_settings(tmp_path / "ws")
    with open_store(settings) as store:
        db.ensure(store)
        functional = _add(store, "functional stays")
        ids = [_add(store, f"cleanup {n}", type="cleanup", priority="low") for n in range(11)]
        pending = queue.pending(store)
        oldest = queue.get(store, ids[0])
    cleanups = [d for d in pending if d.type == "cleanup"]
    assert len(cleanups) == 10
    assert [d.id for d in cleanups] == ids[1:]
    assert oldest is not None and oldest.state == "dropped"
    assert oldest.fate_note is not None and "cleanup cap (10)" in oldest.fate_note
    assert any(d.id == functional for d in pending)


def test_same_directive_is_not_queued_twice(tmp_path: Path) -> None:
    settings = review_settings(tmp_path / "ws")
    with open_store(settings) as store:
        db.ensure(store)
        assert _add(store, "Use pathlib everywhere") is not None
        assert _add(store, "use  pathlib everywhere") is None
        assert len(queue.pending(store)) == 1


def test_task_that_addresses_a_directive_records_its_fate(tmp_path: Path) -> None:
    """The task names the directive in its final answer; only directives it was shown count."""
    settings = review_settings(tmp_path / "ws")
    task = Task("t1", "inbox", "fix it")
    with open_store(settings) as store:
        db.ensure(store)
        shown = _add(store, "add a retry")
        prompt_sections(settings, store, task)
        not_shown = _add(store, "added later")
        text = (
            f"Done.\nDIRECTIVE D{shown}: addressed - retry added\n"
            f"DIRECTIVE D{not_shown}: addressed - claims too much"
        )
        after_task(settings, store, finished("t1", final_text=text))
        done, later = queue.get(store, shown), queue.get(store, not_shown)
        again = prompt_sections(settings, store, Task("t2", "inbox", "next"))
    assert done is not None and done.state == "addressed" and done.fate_task == "t1"
    assert later is not None and later.state == "pending"
    assert f"D{shown} " not in again[0] and f"D{not_shown} " in again[0]


def test_failed_task_can_escalate_but_not_address_a_directive(tmp_path: Path) -> None:
    settings = review_settings(tmp_path / "ws")
    with open_store(settings) as store:
        db.ensure(store)
        one, two = _add(store, "first"), _add(store, "second")
        prompt_sections(settings, store, Task("t1", "inbox", "x"))
        text = f"DIRECTIVE D{one}: addressed - yes\n- DIRECTIVE D{two}: escalated - needs a human"
        after_task(settings, store, finished("t1", Outcome.FAILURE, final_text=text))
        first, second = queue.get(store, one), queue.get(store, two)
    assert first is not None and first.state == "pending"
    assert second is not None and second.state == "escalated"


def test_dropping_a_directive_records_the_fate(tmp_path: Path) -> None:
    settings = review_settings(tmp_path / "ws")
    with open_store(settings) as store:
        db.ensure(store)
        directive_id = _add(store, "something")
        assert directive_id is not None
        assert queue.drop(store, directive_id)
        assert not queue.drop(store, directive_id)  # only pending ones
        dropped = queue.get(store, directive_id)
    assert dropped is not None and dropped.state == "dropped"
    assert dropped.fate_note == "dropped by the user"


def test_the_directives_about_the_task_come_first_within_the_budget(tmp_path: Path) -> None:
    """Over the budget, the critical directive and the one naming the task's file are shown;
    the others stay queued for a later task (pending, not dropped)."""
    settings = review_settings(tmp_path / "ws", {"directive_token_budget": 200})
    with open_store(settings) as store:
        db.ensure(store)
        for n in range(6):
            _add(store, f"unrelated cleanup {n}: " + "word " * 20, type="cleanup")
        about = queue.add(
            store,
            type="functional",
            source="design",
            description="split the long function",
            files=["src/parser.py"],
            seq=0,
            cleanup_cap=10,
        )
        critical = _add(store, "stop writing to the shared file", priority="critical")
        task = Task("t1", "inbox", "Speed up src/parser.py")
        (text,) = prompt_sections(settings, store, task)
        assert f"- D{critical} " in text and f"- D{about} " in text
        assert text.count("- D") < 8
        assert len(queue.pending(store)) == 8


def test_a_session_restored_from_a_wait_is_told_only_the_directives_that_changed(
    tmp_path: Path,
) -> None:
    """The first time, nothing is a change (the briefing holds them all); after a wait, the
    new directive and the one withdrawn are the changes."""
    settings = review_settings(tmp_path / "ws")
    with open_store(settings) as store:
        db.ensure(store)
        kept = _add(store, "keep this one")
        dropped = _add(store, "drop this one")
        task = Task("t1", "inbox", "something")
        first = task_sections(settings, store, task)
        assert f"D{kept} " in first.sections[0] and f"D{dropped} " in first.sections[0]
        queue.drop(store, int(dropped or 0))
        added = _add(store, "a new one")
        again = task_sections(settings, store, task)
    assert f"D{added} " in again.sections[0]
    new, gone = again.changes
    assert new.startswith("## DIRECTIVES NEW SINCE YOU STARTED") and f"D{added} " in new
    assert f"D{kept} " not in new
    assert gone == f"## DIRECTIVES WITHDRAWN\nD{dropped}: no longer asked of this task."
