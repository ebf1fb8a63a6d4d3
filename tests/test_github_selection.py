"""Selecting GitHub issues: label, `Agent:` field, priority, trust, and the cost of idle runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import state_of
from tests.fakes.github_server import FakeGitHub, make_source
from worker.sources.github.selection import agent_field, parse_task_id, priority_of

REPO = "acme/app"


@pytest.fixture
def server(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_repo(REPO, {"maintainer": "write", "lead": "admin", "viewer": "read"})
    return fake_github


def writes(server: FakeGitHub) -> list[str]:
    """Every request that changes something (a GraphQL query reads: it is a POST too)."""
    return [
        f"{e.method} {e.path}" for e in server.log if e.method != "GET" and e.path != "/graphql"
    ]


def test_label_agent_field_and_priority_select_and_order(
    server: FakeGitHub, tmp_path: Path
) -> None:
    """P-labels first (most urgent), then age; other agents, locked, assigned, done: skipped."""
    server.add_issue(
        REPO,
        1,
        body="Agent: Claude Code\nold, no priority",
        labels=("roo-schedulable",),
        age_s=9000,
    )
    server.add_issue(REPO, 2, body="**Agent:** Any", labels=("roo-schedulable", "priority:high"))
    server.add_issue(REPO, 3, body="Agent: Both", labels=("roo-schedulable", "P1"), age_s=60)
    server.add_issue(REPO, 4, body="Agent: Codex", labels=("roo-schedulable",))
    server.add_issue(REPO, 5, body="no field at all", labels=("roo-schedulable",), age_s=100)
    server.add_issue(REPO, 6, labels=("roo-schedulable",), locked=True)
    server.add_issue(
        REPO,
        7,
        labels=("roo-schedulable",),
        assignees=[{"login": "someone"}],
        assignee={"login": "someone"},
    )
    server.add_issue(REPO, 8, labels=("roo-schedulable", "worker:done"))
    server.add_issue(REPO, 9, body="Agent: Claude Code", labels=("bug",))  # not labelled
    server.add_issue(REPO, 10, labels=("roo-schedulable",), pull_request={"url": "x"})
    source = make_source(tmp_path / "ws", server)
    listing = source.list()
    assert [t.id for t in listing.tasks] == [f"{REPO}#3", f"{REPO}#2", f"{REPO}#1", f"{REPO}#5"]
    assert [t.priority for t in listing.tasks] == [1, 2, 5, 5]
    skipped = {s.task_id: s.reason_code for s in listing.skipped}
    assert skipped == {
        f"{REPO}#4": "NOT_FOR_THIS_AGENT",
        f"{REPO}#6": "ISSUE_LOCKED",
        f"{REPO}#7": "ASSIGNED_TO_OTHER",
        f"{REPO}#8": "ALREADY_DONE",
    }
    assert listing.errors == [] and writes(server) == []
    task = listing.tasks[0]
    assert task.ref == {
        "repo": REPO,
        "number": 3,
        "url": f"https://github.com/{REPO}/issues/3",
        "updated_at": task.ref["updated_at"],
    }


def test_agent_field_can_be_required(server: FakeGitHub, tmp_path: Path) -> None:
    server.add_issue(REPO, 1, body="just text", labels=("roo-schedulable",))
    listing = make_source(tmp_path / "ws", server, require_agent_field=True).list()
    assert listing.tasks == []
    assert listing.skipped[0].reason_code == "AGENT_FIELD_MISSING"


def test_label_applied_by_someone_without_write_access_is_untrusted(
    server: FakeGitHub, tmp_path: Path
) -> None:
    """Skipped with UNTRUSTED_TRIGGER and left untouched: no write of any kind."""
    server.add_issue(
        REPO, 1, body="Agent: Any\nrm -rf /", labels=("roo-schedulable",), labeled_by="viewer"
    )
    server.add_issue(REPO, 2, labels=("roo-schedulable",), labeled_by="stranger")
    server.add_issue(REPO, 3, labels=("roo-schedulable",), labeled_by="friend")
    server.add_issue(REPO, 4, labels=("roo-schedulable",), labeled_by="lead")
    source = make_source(tmp_path / "ws", server, trusted_users=["Friend"])
    listing = source.list()
    assert [t.id for t in listing.tasks] == [f"{REPO}#3", f"{REPO}#4"]
    assert {s.task_id: s.reason_code for s in listing.skipped} == {
        f"{REPO}#1": "UNTRUSTED_TRIGGER",
        f"{REPO}#2": "UNTRUSTED_TRIGGER",
    }
    assert "viewer" in listing.skipped[0].detail or "viewer" in listing.skipped[1].detail
    # At claim time the check is made again: still no claim, no comment, no label.
    untrusted = source.find(f"{REPO}#1")  # as `--task-id` would
    assert untrusted is not None and source.claim(untrusted, run_id=1) is False
    assert writes(server) == [] and server.comments_of(REPO, 1) == []


def test_idle_run_is_answered_with_304_and_costs_nothing(
    server: FakeGitHub, tmp_path: Path
) -> None:
    """The second run (a new process: new source, same SQLite) spends no rate limit."""
    server.add_issue(REPO, 1, labels=("roo-schedulable",), labeled_by="stranger")
    server.add_issue(
        REPO,
        2,
        labels=("roo-schedulable",),
        labeled_by="maintainer",
        assignees=[{"login": "someone"}],
    )
    first = make_source(tmp_path / "ws", server)
    assert first.list().tasks == []
    first.store.close()
    costed_before, requests_before = server.costed, len(server.log)
    second = make_source(tmp_path / "ws", server)
    listing = second.list()
    assert listing.tasks == [] and len(listing.skipped) == 2
    assert server.costed == costed_before  # nothing changed: free
    assert len(server.log) - requests_before == 2  # the issues list and /user, both 304
    assert second.client.stats.not_modified == 2
    # Something changes: one costed request for the list (plus what the new issue needs).
    server.add_issue(REPO, 3, labels=("roo-schedulable",), labeled_by="maintainer")
    assert [t.id for t in second.list().tasks] == [f"{REPO}#3"]


def test_dry_run_reads_but_writes_nothing(server: FakeGitHub, tmp_path: Path) -> None:
    server.add_issue(REPO, 1, labels=("roo-schedulable",))
    source = make_source(tmp_path / "ws", server, dry_run=True)
    listing = source.list()
    assert [t.id for t in listing.tasks] == [f"{REPO}#1"]
    assert source.claim(listing.tasks[0], run_id=1) is False
    assert writes(server) == []
    assert not state_of(tmp_path / "ws").exists()


def test_find_by_task_id(server: FakeGitHub, tmp_path: Path) -> None:
    server.add_issue(REPO, 12, title="Fix it", labels=())
    source = make_source(tmp_path / "ws", server)
    task = source.find(f"{REPO}#12")
    assert task is not None and task.title == "Fix it" and task.source == "github"
    assert source.find(f"{REPO}#404") is None  # deleted issue: 404
    assert source.find("other/repo#1") is None  # not a configured repository
    assert source.find("not-a-task-id") is None


@pytest.mark.parametrize(
    ("body", "value"),
    [
        ("Agent: Claude Code", "Claude Code"),
        ("intro\n**Agent**: Both\nmore", "Both"),
        ("> agent:   Any  ", "Any"),
        ("Some text mentioning Agent: inline", None),
        ("", None),
    ],
)
def test_agent_field(body: str, value: str | None) -> None:
    assert agent_field(body) == value


@pytest.mark.parametrize(
    ("labels", "priority"),
    [
        ([], 5),
        (["P0"], 0),
        (["p7", "P3"], 3),
        (["priority:low"], 8),
        (["priority: critical"], 0),
        (["Priority/2"], 2),
        (["priority:P4"], 4),
        (["bug"], 5),
    ],
)
def test_priority_from_labels(labels: list[str], priority: int) -> None:
    assert priority_of(labels) == priority


def test_task_ids() -> None:
    assert parse_task_id("acme/app#123") == ("acme/app", 123)
    assert parse_task_id("acme/app#0") is None
    assert parse_task_id("acme#1") is None
