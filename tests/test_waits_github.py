"""GitHub conditions against the local fake GitHub server: `/approve` comments from allowed
people only, `github_decision` on labels, closing and merges, one batched conditional look
per repository, and no re-check before the interval."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.fakes.github_server import FakeGitHub, iso
from tests.test_waits_conditions import NOW, log_codes, make_wait, ready_ids, scan
from worker.config import Settings, load_settings

REPO = "acme/app"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub().start()
    fake.add_repo(REPO, collaborators={"alice": "write", "maintainer": "maintain"})
    fake.add_issue(REPO, 12, age_s=7200)
    fake.add_issue(REPO, 13, age_s=7200)
    yield fake
    fake.stop()


@pytest.fixture
def settings(workspace: Path, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> Settings:
    for key, value in {
        "WORKER_FALLBACK__ENABLED": "false",
        "WORKER_GITHUB_TOKEN": "test-token-abc",
        "WORKER_GITHUB__BASE_URL": github.url,
        "WORKER_GITHUB__SECONDS_BETWEEN_REQUESTS": "0",
        "WORKER_GITHUB__SECONDS_BETWEEN_WRITES": "0",
        "WORKER_GITHUB__RETRIES": "0",
        "WORKER_WAITS__RECHECK_INTERVAL_S": "0",
    }.items():
        monkeypatch.setenv(key, value)
    return load_settings(workspace)


def issue_wait(settings: Settings, number: int, resume_when: str, **fields: object) -> Path:
    return make_wait(
        settings,
        f"{REPO}#{number}",
        resume_when,
        source="github",
        sourceRef={"repo": REPO, "number": number},
        **fields,
    )


def add_event(
    github: FakeGitHub,
    number: int,
    kind: str,
    actor: str,
    label: str | None = None,
    commit: str | None = None,
) -> None:
    event = github._event(kind, actor, label, time.time())
    event["commit_id"] = commit
    github.repos[REPO]["events"][number].append(event)
    github.repos[REPO]["issues"][number]["updated_at"] = iso()


def test_approve_comment_from_a_writer_resumes(settings: Settings, github: FakeGitHub) -> None:
    issue_wait(settings, 12, "user_approval")
    assert ready_ids(scan(settings)) == {}
    github.add_comment(REPO, 12, "/approve go with plan B", login="alice")
    answer = ready_ids(scan(settings))[f"{REPO}#12"]
    assert "Approved by alice" in answer and "go with plan B" in answer


def test_a_strangers_approve_comment_is_ignored_and_logged(
    settings: Settings, github: FakeGitHub
) -> None:
    issue_wait(settings, 12, "user_approval")
    github.add_comment(REPO, 12, "/approve lgtm", login="mallory")
    assert ready_ids(scan(settings)) == {}
    assert "APPROVER_NOT_ALLOWED" in log_codes(settings, f"{REPO}#12")


def test_the_waits_approvers_list_wins_over_write_access(
    settings: Settings, github: FakeGitHub
) -> None:
    issue_wait(settings, 12, "user_approval", approvers=["carol"])
    github.add_comment(REPO, 12, "/approve", login="alice")  # a writer, but not listed
    assert ready_ids(scan(settings)) == {}
    github.add_comment(REPO, 12, "/reject not now", login="carol")
    assert "Rejected by carol" in ready_ids(scan(settings))[f"{REPO}#12"]


def test_comments_before_the_wait_began_do_not_count(
    settings: Settings, github: FakeGitHub
) -> None:
    github.add_comment(REPO, 12, "/approve", login="alice", age_s=600)
    issue_wait(settings, 12, "user_approval")
    github.add_comment(REPO, 12, "a question, not an approval", login="alice")
    assert ready_ids(scan(settings)) == {}


@pytest.mark.parametrize(
    ("kind", "actor", "label", "commit", "expected"),
    [
        ("labeled", "maintainer", "decision:go", None, "the label 'decision:go' was added"),
        ("closed", "maintainer", None, None, "the issue was closed"),
        ("reopened", "alice", None, None, "the issue was reopened"),
        ("closed", "alice", None, "abc123", "the linked commit abc123 was merged"),
    ],
)
def test_github_decision_ready(
    settings: Settings,
    github: FakeGitHub,
    kind: str,
    actor: str,
    label: str | None,
    commit: str | None,
    expected: str,
) -> None:
    issue_wait(settings, 12, "github_decision")
    add_event(github, 12, kind, actor, label, commit)
    assert expected in ready_ids(scan(settings))[f"{REPO}#12"]


def test_github_decision_not_ready(settings: Settings, github: FakeGitHub) -> None:
    issue_wait(settings, 12, "github_decision")
    add_event(github, 12, "labeled", "maintainer", "bug")  # not a decision label
    add_event(github, 12, "closed", "mallory")  # not someone allowed to decide
    github.add_comment(REPO, 12, "any news?", login="alice")
    assert ready_ids(scan(settings)) == {}
    assert "APPROVER_NOT_ALLOWED" in log_codes(settings, f"{REPO}#12")


def test_nothing_changed_costs_no_request_per_wait(settings: Settings, github: FakeGitHub) -> None:
    for number in (12, 13):
        issue_wait(settings, number, "user_approval")
        issue_wait(settings, number, "github_decision", taskId=f"{REPO}#{number}-d")
    first = scan(settings)
    assert first.pending == 4 and first.github_requests == 1  # one look at the repository
    before = len(github.log)
    second = scan(settings)
    assert second.github_requests == 0
    assert [(e.path, e.status) for e in github.log[before:]] == [(f"/repos/{REPO}/issues", 304)]


def test_a_wait_is_not_rechecked_before_the_interval(
    settings: Settings, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKER_WAITS__RECHECK_INTERVAL_S", "600")
    settings = load_settings(settings.workspace)
    issue_wait(settings, 12, "user_approval")
    github.add_comment(REPO, 12, "thinking about it", login="alice")
    assert ready_ids(scan(settings)) == {}  # looked: a comment, no approval
    github.add_comment(REPO, 12, "/approve", login="alice")
    before = len(github.log)
    assert ready_ids(scan(settings)) == {}  # checked less than 600 s ago: not asked
    assert len(github.log) == before
    later = scan(settings, now=datetime.now(UTC) + timedelta(seconds=601))
    assert f"{REPO}#12" in ready_ids(later)
    # Once found, the answer is kept: the next runs do not ask again.
    before = len(github.log)
    assert f"{REPO}#12" in ready_ids(scan(settings, now=datetime.now(UTC) + timedelta(seconds=602)))
    assert len(github.log) == before


def test_github_down_keeps_waiting_and_the_rest_goes_on(
    settings: Settings, github: FakeGitHub
) -> None:
    issue_wait(settings, 12, "user_approval")
    make_wait(settings, "t", "time", resumeAt=NOW - timedelta(seconds=1))
    github.fail("GET", r"/issues$", 404)
    result = scan(settings)
    assert set(ready_ids(result)) == {"t"} and result.pending == 1
    assert "WAIT_CHECK_FAILED" in log_codes(settings, f"{REPO}#12")
