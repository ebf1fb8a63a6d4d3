"""Claiming GitHub issues: visible claims, races between machines, expiry."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.fakes.github_server import FakeGitHub, make_source
from worker.models import Outcome, TaskResult
from worker.sources.github.claims import marker

REPO = "acme/app"
TASK = f"{REPO}#1"


@pytest.fixture
def server(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_issue(REPO, 1, body="Agent: Claude Code\nDo it.", labels=("roo-schedulable",))
    return fake_github


def claim_markers(server: FakeGitHub) -> list[str]:
    return [c["body"].splitlines()[0] for c in server.comments_of(REPO, 1)]


def test_claim_is_visible_label_assignment_and_one_marked_comment(
    server: FakeGitHub, tmp_path: Path
) -> None:
    source = make_source(tmp_path / "ws", server)
    task = source.list().tasks[0]
    assert source.claim(task, run_id=7) is True
    assert claim_markers(server) == [marker("m1", TASK, 7)]
    assert "worker:in-progress" in server.labels_of(REPO, 1)
    assert [a["login"] for a in server.repos[REPO]["issues"][1]["assignees"]] == ["worker-bot"]
    assert task.ref["comment_id"] == server.comments_of(REPO, 1)[0]["id"]
    assert source.store.claim_of(TASK)["state"] == "active"
    # The same machine does not list it again while it works on it.
    again = source.list()
    assert again.tasks == [] and again.skipped[0].reason_code == "ALREADY_CLAIMED"


def test_second_machine_backs_off_from_a_live_claim(server: FakeGitHub, tmp_path: Path) -> None:
    one, two = make_source(tmp_path / "a", server, "m1"), make_source(tmp_path / "b", server, "m2")
    task_one, task_two = one.list().tasks[0], two.list().tasks[0]
    assert one.claim(task_one, run_id=1) is True
    assert two.claim(task_two, run_id=1) is False
    assert claim_markers(server) == [marker("m1", TASK, 1)]
    assert two.store.claim_of(TASK)["state"] == "released"
    listing = two.list()
    assert listing.tasks == [] and listing.skipped[0].reason_code == "ALREADY_CLAIMED"


def test_two_machines_racing_one_works_one_backs_off(server: FakeGitHub, tmp_path: Path) -> None:
    """Both see no claim, both post their claim comment at the same moment (a barrier in the
    server holds the first until the second arrives); both re-read; the earliest wins."""
    server.comment_barrier = threading.Barrier(2)
    results: dict[str, bool] = {}

    def take(name: str) -> None:  # a machine: its own workspace, store and client
        source = make_source(tmp_path / name, server, name)
        results[name] = source.claim(source.find(TASK), run_id=5)

    threads = [threading.Thread(target=take, args=(n,)) for n in ("m1", "m2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results.values()) == [False, True]
    assert server.count("POST", "/issues/1/comments") == 2  # both really claimed
    winner = next(name for name, won in results.items() if won)
    assert claim_markers(server) == [marker(winner, TASK, 5)]  # the loser removed its own


def test_claim_of_a_dead_machine_expires(server: FakeGitHub, tmp_path: Path) -> None:
    """A claim comment not renewed for claim_ttl_s no longer holds the issue."""
    issue = server.repos[REPO]["issues"][1]
    server.add_comment(REPO, 1, marker("dead", TASK, 3) + "\nworking", age_s=7200)
    issue["labels"].append({"name": "worker:in-progress"})
    issue["updated_at"] = "2020-01-01T00:00:00Z"
    fresh = make_source(tmp_path / "a", server, claim_ttl_s=3600)
    task = fresh.list().tasks[0]
    assert task.id == TASK
    assert fresh.claim(task, run_id=1) is True
    assert claim_markers(server) == [marker("dead", TASK, 3), marker("m1", TASK, 1)]
    # With a longer TTL the same claim is live: listed as claimed, and claim() backs off.
    patient = make_source(tmp_path / "b", server, "m2", claim_ttl_s=86400)
    assert patient.claim(patient.find(TASK), run_id=1) is False


def test_forged_marker_from_a_stranger_does_not_block(server: FakeGitHub, tmp_path: Path) -> None:
    server.add_comment(REPO, 1, marker("evil", TASK, 1), login="stranger", association="NONE")
    source = make_source(tmp_path / "ws", server)
    assert source.claim(source.list().tasks[0], run_id=2) is True


def test_own_dead_run_is_taken_back(server: FakeGitHub, tmp_path: Path) -> None:
    """This machine's previous run died holding the claim: its next run takes the task again."""
    source = make_source(tmp_path / "ws", server)
    task = source.list().tasks[0]
    assert source.claim(task, run_id=1) is True
    source.store.release_claim(TASK, "expired")  # what recover_expired does to a dead lease
    again = source.list()
    assert [t.id for t in again.tasks] == [TASK]
    assert source.claim(again.tasks[0], run_id=2) is True


def test_stopped_task_becomes_available_again(server: FakeGitHub, tmp_path: Path) -> None:
    source = make_source(tmp_path / "ws", server)
    task = source.list().tasks[0]
    assert source.claim(task, run_id=1)
    result = TaskResult(task, Outcome.STOPPED, "stop requested")
    source.report(task, result)
    source.release(task, result)
    assert "worker:in-progress" not in server.labels_of(REPO, 1)
    assert server.repos[REPO]["issues"][1]["assignees"] == []
    other = make_source(tmp_path / "b", server, "m2")
    assert [t.id for t in other.list().tasks] == [TASK]
    assert other.claim(other.list().tasks[0], run_id=1) is True
