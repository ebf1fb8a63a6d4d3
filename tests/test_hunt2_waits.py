"""Hunted wait bugs (second round): an approval counts only while its approver is trusted, up
to the moment the wait resumes. Driven through phase 0 on a real workspace and SQLite store."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests.fakes.github_server import FakeGitHub
from worker.config import load_settings
from worker.sources.message import write_message as write_inbox
from worker.state.store import Store
from worker.waits import intercom, phase0
from worker.waits.ledger import Ledger

from .test_waits_conditions import make_wait

REPO = "acme/app"


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")


def _ready(workspace: Path, approvers: list[str]) -> dict[str, str]:
    settings = load_settings(workspace, waits={"approvers": approvers})
    with Store(settings.db_path) as store:
        return {w.task.id: w.answer for w in phase0.scan(settings, store).ready}


def _approve_by_note(workspace: Path, task_id: str) -> None:
    intercom.write_note(load_settings(workspace), task_id, "approval", "go", by="alice")


def _approve_by_reply(workspace: Path, task_id: str) -> None:
    reply = {"id": "r1", "from": "alice", "to": "test-machine", "in_reply_to": task_id}
    write_inbox(load_settings(workspace).inbox, {**reply, "body": "/approve go"})


@pytest.mark.parametrize("approve", [_approve_by_note, _approve_by_reply], ids=["note", "reply"])
def test_an_approval_found_before_its_approver_lost_trust_does_not_resume_the_wait(
    workspace: Path, approve: object
) -> None:
    """alice (on the approvers list) approves; a run finds the approval but does not resume
    the wait (it dies, or another ready wait goes first). The operator then takes alice off
    the list (her account was taken over). The next run must not resume the wait on her word:
    the approver is checked when the wait resumes, not only when the answer was first seen."""
    settings = load_settings(workspace, waits={"approvers": ["alice"]})
    make_wait(settings, "msg-a", "user_approval")
    approve(workspace, "msg-a")  # type: ignore[operator]
    assert "Approved by alice" in _ready(workspace, ["alice"])["msg-a"]
    assert _ready(workspace, ["carol"]) == {}
    with Store(settings.db_path) as store:
        codes = [row["code"] for row in Ledger(store).log_of("msg-a")]
    assert "APPROVER_NOT_ALLOWED" in codes


def test_a_github_approval_kept_for_a_wait_is_judged_again_when_the_trusted_list_changes(
    workspace: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on GitHub: alice's `/approve` comment is found while she is a trusted user;
    once the operator drops her from `github.trusted_users`, the kept answer is looked at
    again (a fresh look at the issue) and refused."""
    fake_github.add_repo(REPO, {"alice": "write"})
    fake_github.add_issue(REPO, 12, age_s=7200)
    monkeypatch.setenv("WORKER_WAITS__RECHECK_INTERVAL_S", "3600")  # no re-look by itself
    local = {"base_url": fake_github.url, "seconds_between_requests": 0, "retries": 0}
    settings = load_settings(workspace, github=local)
    task_id = f"{REPO}#12"
    ref = {"repo": REPO, "number": 12}
    make_wait(settings, task_id, "user_approval", source="github", sourceRef=ref)
    fake_github.add_comment(REPO, 12, "/approve go", login="alice")

    def ready(trusted: list[str]) -> dict[str, str]:
        settings = load_settings(workspace, github={**local, "trusted_users": trusted})
        with Store(settings.db_path) as store:
            return {w.task.id: w.answer for w in phase0.scan(settings, store).ready}

    assert "Approved by alice" in ready(["alice"])[task_id]
    assert ready(["carol"]) == {}


def _edit_comment(server: FakeGitHub, comment_id: int, body: str) -> None:
    """PATCH the comment through the API, as a collaborator with write access may."""
    server.tokens["bobs-token"] = "bob"
    request = urllib.request.Request(
        f"{server.url}/repos/{REPO}/issues/comments/{comment_id}",
        data=json.dumps({"body": body}).encode(),
        method="PATCH",
        headers={"Authorization": "token bobs-token", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as answer:
        assert answer.status == 200


def test_a_trusted_persons_comment_edited_into_an_approval_approves_nothing(
    workspace: Path, fake_github: FakeGitHub
) -> None:
    """Only alice may approve. alice comments a question; bob (write access, so he may edit
    any comment of the repository, but not on the list) edits her comment into `/approve`.
    The comment still reads as alice's: an edited comment is no approval (it is logged, and
    alice can approve with a new comment)."""
    fake_github.add_repo(REPO, {"alice": "write", "bob": "write"})
    fake_github.add_issue(REPO, 12, age_s=7200)
    local = {"base_url": fake_github.url, "seconds_between_requests": 0, "retries": 0}
    waits = {"approvers": ["alice"], "recheck_interval_s": 0}
    settings = load_settings(workspace, github=local, waits=waits)
    task_id = f"{REPO}#12"
    make_wait(
        settings, task_id, "user_approval", source="github", sourceRef={"repo": REPO, "number": 12}
    )
    question = fake_github.add_comment(REPO, 12, "Which branch?", login="alice", age_s=30)
    _edit_comment(fake_github, question["id"], "/approve ship it")
    with Store(settings.db_path) as store:
        assert phase0.scan(settings, store).ready == []
        codes = [row["code"] for row in Ledger(store).log_of(task_id)]
    assert "APPROVAL_EDITED" in codes
    fake_github.add_comment(REPO, 12, "/approve yes", login="alice")
    with Store(settings.db_path) as store:
        (ready,) = phase0.scan(settings, store).ready
    assert ready.answer.startswith("Approved by alice") and "yes" in ready.answer


def test_an_approval_met_by_a_secondary_rate_limit_is_read_again_not_refused(
    workspace: Path, fake_github: FakeGitHub
) -> None:
    """alice (write access) approves with a comment. When phase 0 asks GitHub whether she may
    approve, GitHub answers 403 "secondary rate limit" with a Retry-After longer than worker
    waits. That is no "she may not": the wait is not refused on it (before, the approval was
    logged as APPROVER_NOT_ALLOWED and never read again); the next look finds it."""
    fake_github.add_repo(REPO, {"alice": "write"})
    fake_github.add_issue(REPO, 12, age_s=7200)
    fake_github.fail(
        "GET",
        r"/collaborators/alice/permission$",
        403,
        headers={"Retry-After": "3600"},
        message="You have exceeded a secondary rate limit. Please retry later.",
    )
    local = {"base_url": fake_github.url, "seconds_between_requests": 0, "retries": 1}
    settings = load_settings(workspace, github=local, waits={"recheck_interval_s": 0})
    task_id = f"{REPO}#12"
    ref = {"repo": REPO, "number": 12}
    make_wait(settings, task_id, "user_approval", age_s=600, source="github", sourceRef=ref)
    fake_github.add_comment(REPO, 12, "/approve go", login="alice", age_s=120)
    with Store(settings.db_path) as store:
        assert phase0.scan(settings, store).ready == []
        codes = [row["code"] for row in Ledger(store).log_of(task_id)]
        assert "APPROVER_NOT_ALLOWED" not in codes and "WAIT_CHECK_FAILED" in codes
        (ready,) = phase0.scan(settings, store).ready
    assert ready.answer.startswith("Approved by alice")
