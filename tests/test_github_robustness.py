"""GitHub faults that must neither run a task twice nor stop the run: a report that fails
(retried by the next run, the issue not taken again meanwhile), a claim that fails half-way
(withdrawn), and malformed answers (a refused claim or a skipped issue, never a crash)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.github_server import FakeGitHub, make_source
from worker.models import IterationRecord, Outcome, TaskResult
from worker.sources.github.claims import marker

REPO = "acme/app"
TASK = f"{REPO}#1"


@pytest.fixture
def server(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_issue(REPO, 1, body="Agent: Any\nDo it.", labels=("roo-schedulable",))
    return fake_github


def success(task) -> TaskResult:  # type: ignore[no-untyped-def]
    record = IterationRecord("code-simple", "haiku", 1, "success", "", None, 3.0, 0.01, 10, 10, 0)
    return TaskResult(
        task, Outcome.SUCCESS, "parser fixed", modes=["code-simple"], iterations=[record] * 2
    )


def test_resumed_task_ending_replaces_the_waiting_label(server: FakeGitHub, tmp_path: Path) -> None:
    """A task that waited, then resumed and succeeded, shows only `done`: labels show the end."""
    source = make_source(tmp_path / "ws", server, push=False)
    task = source.list().tasks[0]
    assert source.claim(task, run_id=1)
    source.report(task, TaskResult(task, Outcome.WAITING, "needs approval"))
    assert "worker:waiting" in server.labels_of(REPO, 1)
    source.report(task, success(task))  # the resumed run's end (no new claim on resume)
    labels = server.labels_of(REPO, 1)
    assert "worker:done" in labels and "worker:waiting" not in labels


def test_failed_report_is_retried_by_the_next_run_and_the_issue_not_taken_again(
    server: FakeGitHub, tmp_path: Path
) -> None:
    """GitHub is down when the task ends: the outcome is kept, the next listing reports it
    (one status comment, the end labels) instead of offering the issue as a new task."""
    source = make_source(tmp_path / "ws", server, push=False)
    task = source.list().tasks[0]
    assert source.claim(task, run_id=1)
    server.fail("PATCH", r"/issues/comments/\d+$", 500, times=100)
    server.fail("POST", r"/issues/1/labels$", 500, times=100)
    with pytest.raises(Exception, match="report of"):
        source.report(task, success(task))
    source.release(task, success(task))
    server.faults.clear()
    # The claim label is still there and quiet for longer than the TTL: normally a dead claim.
    server.repos[REPO]["issues"][1]["updated_at"] = "2020-01-01T00:00:00Z"
    later = make_source(tmp_path / "ws", server, push=False, claim_ttl_s=60)
    listing = later.list()
    assert listing.tasks == []
    comments = server.comments_of(REPO, 1)
    assert len(comments) == 1
    assert comments[0]["body"].startswith(marker("m1", TASK, 1, state="success"))
    assert "| Iterations | 2 |" in comments[0]["body"]
    labels = server.labels_of(REPO, 1)
    assert "worker:done" in labels and "worker:in-progress" not in labels
    # Delivered once: the run after that asks nothing more about it.
    posts = server.count("POST")
    assert later.list().tasks == [] and server.count("POST") == posts


def test_claim_failing_after_its_comment_withdraws_it(server: FakeGitHub, tmp_path: Path) -> None:
    """The claim comment was posted, then the label could not be set: the claim is withdrawn,
    so another machine is not kept off the issue for the whole claim TTL."""
    one = make_source(tmp_path / "a", server, "m1")
    server.fail("POST", r"/issues/1/labels$", 403, message="Resource not accessible")
    assert one.claim(one.list().tasks[0], run_id=1) is False
    assert server.comments_of(REPO, 1) == []
    two = make_source(tmp_path / "b", server, "m2")
    assert two.claim(two.list().tasks[0], run_id=1) is True


def test_malformed_answer_at_claim_time_is_a_refused_claim_not_a_crash(
    server: FakeGitHub, tmp_path: Path
) -> None:
    source = make_source(tmp_path / "ws", server)
    task = source.list().tasks[0]
    server.fail("GET", r"/issues/1/comments$", 200, body={"unexpected": "object"}, times=10)
    assert source.claim(task, run_id=1) is False
    assert source.store.claim_of(TASK)["state"] == "released"  # available again


def test_malformed_issue_is_skipped_and_the_others_still_listed(
    server: FakeGitHub, tmp_path: Path
) -> None:
    server.add_issue(REPO, 2, body="Agent: Any", labels=("roo-schedulable",))
    server.repos[REPO]["issues"][2]["user"] = "not-an-object"
    listing = make_source(tmp_path / "ws", server).list()
    assert [t.id for t in listing.tasks] == [TASK]
    assert any(s.reason_code == "MALFORMED_ISSUE" for s in listing.skipped)


def test_unreadable_rate_limit_header_does_not_break_requests(
    server: FakeGitHub, tmp_path: Path
) -> None:
    source = make_source(tmp_path / "ws", server)
    server.fail(
        "GET",
        r"/issues/1$",
        200,
        apply_first=True,
        headers={"X-RateLimit-Remaining": "plenty"},
        body=server.repos[REPO]["issues"][1],
    )
    assert source.find(TASK) is not None


def test_malformed_repository_answer_still_writes_the_status_comment(
    server: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening the pull request meets a malformed answer: the comment and labels still say
    how the task ended (else the issue would look claimed, and be taken again later)."""
    import worker.sources.github.delivery as delivery

    monkeypatch.setattr(delivery, "push_branch", lambda *args, **kwargs: None)  # pushed
    source = make_source(tmp_path / "ws", server, open_pr=True)
    source.open_pr = True
    task = source.list().tasks[0]
    assert source.claim(task, run_id=1)
    server.fail("GET", r"^/repos/acme/app$", 200, body=["not", "a", "repository"], times=10)
    result = success(task)
    result.branch = "worker/acme-app-1"
    source.report(task, result)
    body = server.comments_of(REPO, 1)[0]["body"]
    assert "✅ success" in body and "could not open a pull request" in body
    assert "worker:done" in server.labels_of(REPO, 1)


def test_pending_report_of_a_deleted_issue_is_dropped(server: FakeGitHub, tmp_path: Path) -> None:
    source = make_source(tmp_path / "ws", server, push=False)
    task = source.list().tasks[0]
    assert source.claim(task, run_id=1)
    server.fail("PATCH", r"/issues/comments/\d+$", 500, times=100)
    with pytest.raises(Exception, match="report of"):
        source.report(task, success(task))
    server.faults.clear()
    del server.repos[REPO]["issues"][1]
    server.repos[REPO]["comments"].clear()  # gone with their issue
    assert source.list().errors == []  # dropped, not an error forever
    requests = len(server.log)
    source.list()
    assert len(server.log) == requests + 1  # the listing only
