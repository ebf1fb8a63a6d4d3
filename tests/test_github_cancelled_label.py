"""A GitHub task that ends cancelled is labelled `worker:cancelled` (`[github] cancelled_label`),
never `worker:failed`: `/reject` past the follow-up limit (no agent starts, the pull request is
left open for people) and a pull request a person closed unmerged. Selection passes over the
label as over the other end states, so the issue is not taken again until a person removes it.

Against the fake GitHub, the fake claude and real git.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FakeAgent
from tests.fakes.github_server import FakeGitHub
from tests.test_github_delivery import REPO, TASK, _open, _past_the_limit, _repo, _run, _wait_due
from worker.sources.github.selection import screen, up_to_max
from worker.sources.github.settings import GitHubSettings


@pytest.fixture
def server(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_issue(
        REPO, 7, title="Fix the parser", labels=("roo-schedulable",), body="Agent: Any\n\nFix it."
    )
    return fake_github


def _ended_cancelled(server: FakeGitHub) -> None:
    labels = server.labels_of(REPO, 7)
    assert "worker:cancelled" in labels, labels
    assert not {"worker:failed", "worker:waiting", "worker:in-progress"} & set(labels)


def _label_removed(server: FakeGitHub, name: str) -> None:
    """A person removes the label on GitHub."""
    issue = server.repos[REPO]["issues"][7]
    issue["labels"] = [label for label in issue["labels"] if label["name"] != name]


def test_reject_past_the_limit_labels_the_issue_cancelled_and_it_is_not_taken_again(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    """`/reject` ends the task cancelled (no agent): worker:cancelled, no worker:failed; the
    next run passes the issue over; once a person removes the label it is work again."""
    ws = _past_the_limit(tmp_path, server, fake_claude)
    _wait_due(ws)
    server.add_comment(REPO, 7, "/reject", login="maintainer")
    report = _run(ws)
    assert (report.outcome.value, report.task_id) == ("cancelled", TASK), report.reason
    _ended_cancelled(server)
    calls = len(fake_claude.task_calls)
    assert _run(ws).task_id is None and len(fake_claude.task_calls) == calls
    _label_removed(server, "worker:cancelled")  # the control: the label is what holds it back
    assert _run(ws).task_id == TASK and len(fake_claude.task_calls) == calls + 1


def test_a_pull_request_closed_by_a_person_labels_the_issue_cancelled(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    """Closed unmerged by a person: the task ends cancelled, the issue says so by its label,
    and no later run takes it."""
    ws = _repo(tmp_path, server)
    _open(ws, server, fake_claude)
    server.close_pull(REPO, 1000, "maintainer", merged=False)
    _wait_due(ws)
    report = _run(ws)
    assert (report.outcome.value, report.task_id) == ("cancelled", TASK), report.reason
    assert "closed by maintainer" in report.reason
    _ended_cancelled(server)
    assert _run(ws).task_id is None and len(fake_claude.task_calls) == 1


def test_selection_reads_past_a_renamed_cancelled_label() -> None:
    """`cancelled_label` is an end state: an issue with it is not work (ALREADY_DONE) and is
    not counted against `max_issues`."""
    gh = GitHubSettings(repos=[REPO], cancelled_label="bot:dropped", max_issues=1)
    issue = {
        "number": 1,
        "state": "open",
        "labels": [{"name": "roo-schedulable"}, {"name": "bot:dropped"}],
        "body": "",
    }
    assert screen(issue, gh, "bot").reason_code == "ALREADY_DONE"
    fresh = {**issue, "number": 2, "labels": [{"name": "roo-schedulable"}]}
    assert [i["number"] for i in up_to_max([issue, fresh], gh)] == [1, 2]
