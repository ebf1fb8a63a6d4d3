"""Reporting to GitHub: one status comment, updated in place, end-state labels, no token."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import state_of
from tests.fakes.github_server import FakeGitHub, make_source
from worker.models import IterationRecord, Outcome, TaskResult
from worker.sources.github.claims import marker

REPO = "acme/app"
TASK = f"{REPO}#1"
TOKEN = "ghp_" + "S3cr3t" * 6


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    fake = FakeGitHub(tokens={TOKEN: "worker-bot"}).start()
    fake.add_repo(REPO, {"maintainer": "write"})
    fake.add_issue(REPO, 1, title="Fix the parser", body="Agent: Any", labels=("roo-schedulable",))
    yield fake
    fake.stop()


def iteration(mode: str, status: str) -> IterationRecord:
    return IterationRecord(mode, "haiku", 1, status, "", None, 3.0, 0.01, 10, 10, 0)


def result_of(task, outcome: Outcome = Outcome.SUCCESS, **fields) -> TaskResult:  # type: ignore[no-untyped-def]
    base = dict(
        reason="parser fixed",
        modes=["code-simple", "code-complex"],
        iterations=[iteration("code-simple", "escalate"), iteration("code-complex", "success")],
        duration_s=125.0,
        cost_usd=0.1234,
        branch="worker/acme-app-1",
    )
    return TaskResult(task, outcome, **{**base, **fields})


def claimed(server: FakeGitHub, tmp_path: Path):  # type: ignore[no-untyped-def]
    source = make_source(tmp_path / "ws", server, push=False)
    task = source.list().tasks[0]
    assert source.claim(task, run_id=3)
    return source, task


def test_success_updates_the_one_comment_and_sets_the_labels(
    server: FakeGitHub, tmp_path: Path
) -> None:
    source, task = claimed(server, tmp_path)
    result = result_of(task)
    source.report(task, result)
    source.release(task, result)
    comments = server.comments_of(REPO, 1)
    assert len(comments) == 1
    body = comments[0]["body"]
    assert body.startswith(marker("m1", TASK, 3, state="success"))
    for text in (
        "✅ success",
        "| Iterations | 2 |",
        "code-simple → code-complex (1 escalation)",
        "2 min",
        "$0.1234",
        "`worker/acme-app-1`",
        "parser fixed",
    ):
        assert text in body, text
    labels = server.labels_of(REPO, 1)
    assert "worker:done" in labels and "worker:in-progress" not in labels
    assert source.store.claim_of(TASK)["state"] == "success"
    # Reporting again (a retry of the whole report) still leaves one comment.
    source.report(task, result)
    assert len(server.comments_of(REPO, 1)) == 1


def test_failure_says_why_and_is_labelled_failed(server: FakeGitHub, tmp_path: Path) -> None:
    source, task = claimed(server, tmp_path)
    source.report(
        task, result_of(task, Outcome.FAILURE, reason="tests still fail: 3 errors", branch=None)
    )
    body = server.comments_of(REPO, 1)[0]["body"]
    assert "❌ failure" in body and "**Why:** tests still fail: 3 errors" in body
    assert "worker:failed" in server.labels_of(REPO, 1)
    # A failed issue is not picked up again until someone removes the label.
    assert source.list().skipped[0].reason_code == "ALREADY_DONE"


def test_status_comment_updated_in_place_across_a_retried_request(
    server: FakeGitHub, tmp_path: Path
) -> None:
    """The PATCH is applied but its answer is lost (502): the retry edits the same comment."""
    source, task = claimed(server, tmp_path)
    server.fail("PATCH", r"/issues/comments/\d+$", 502, apply_first=True)
    source.report(task, result_of(task))
    assert server.count("PATCH", "/issues/comments/") == 2
    comments = server.comments_of(REPO, 1)
    assert len(comments) == 1 and "✅ success" in comments[0]["body"]


def test_lost_answer_to_a_new_comment_never_posts_twice(server: FakeGitHub, tmp_path: Path) -> None:
    """A resumed task (no comment id known) whose comment POST succeeded but timed out."""
    source, task = claimed(server, tmp_path)
    server.repos[REPO]["comments"].clear()  # someone deleted the claim comment meanwhile
    task.ref.pop("comment_id")
    server.fail("POST", r"/issues/1/comments$", 502, apply_first=True)
    posts = server.count("POST", "/issues/1/comments")
    source.report(task, result_of(task))
    assert server.count("POST", "/issues/1/comments") == posts + 1  # not retried blindly
    comments = server.comments_of(REPO, 1)
    assert len(comments) == 1
    assert comments[0]["body"].startswith(marker("m1", TASK, 3, state="success"))


def test_waiting_label_and_a_resumed_run_reports_to_the_same_comment(
    server: FakeGitHub, tmp_path: Path
) -> None:
    source, task = claimed(server, tmp_path)
    source.report(task, result_of(task, Outcome.WAITING, reason="needs approval"))
    assert "worker:waiting" in server.labels_of(REPO, 1)
    # Later, the wait state resumes the task in another run (a new source, the ref persisted).
    later = make_source(tmp_path / "ws", server, push=False)
    resumed = later.find(TASK)
    assert resumed is not None
    later.report(resumed, result_of(resumed))
    comments = server.comments_of(REPO, 1)
    assert len(comments) == 1 and "✅ success" in comments[0]["body"]


def test_the_token_never_leaves_the_process(
    server: FakeGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    source, task = claimed(server, tmp_path)
    server.fail("GET", r"/issues$", 500, times=10)
    listing = source.list()
    assert listing.errors and TOKEN not in " ".join(listing.errors)
    source.report(task, result_of(task, final_text=f"I found the token {TOKEN} in env"))
    assert TOKEN not in server.comments_of(REPO, 1)[0]["body"]
    assert TOKEN not in caplog.text
    source.store.close()
    assert TOKEN.encode() not in (state_of(tmp_path / "ws") / "worker.db").read_bytes()
    for extra in state_of(tmp_path / "ws").glob("worker.db-*"):
        assert TOKEN.encode() not in extra.read_bytes()
