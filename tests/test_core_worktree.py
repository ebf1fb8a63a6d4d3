"""`--use-worktree`: the agent works on branch worker/<task-id>; the branch stays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import git
from worker.config import load_settings
from worker.run.runner import RunOptions, run_once

from .conftest import FakeAgent, write_message


@pytest.fixture
def repo(workspace: Path) -> Path:
    git(workspace, "init", "-q", "-b", "main")
    (workspace / "README.md").write_text("hello\n")
    (workspace / ".gitignore").write_text(".worker/\ninbox/\nwait_states/\n")
    git(workspace, "add", "-A")
    git(workspace, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    return workspace


def test_work_is_committed_on_the_task_branch_and_the_worktree_removed(
    repo: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    # The fake agent "edits" a file: a tool call is only shown; do the edit through `text`
    # by pointing the fake at a script that writes into its cwd.
    fake_claude.answers({"status": "success", "reason": "edited"})
    write_message(repo, "msg-wt", subject="Add a file")
    wrapper = fake_claude.path.read_text()
    fake_claude.path.write_text(wrapper.replace("exec ", "echo agent-was-here > NOTES.md\nexec "))
    report = run_once(load_settings(repo), RunOptions(use_worktree=True))
    assert report.outcome.value == "success"
    assert report.branch == "worker/msg-wt"
    cwd = Path(fake_claude.task_calls[0]["cwd"])
    assert cwd != repo and not cwd.exists()  # the worktree is gone...
    assert "worker/msg-wt" in git(repo, "branch", "--list", "worker/*")  # ...the branch stays
    assert git(repo, "show", "worker/msg-wt:NOTES.md").strip() == "agent-was-here"
    assert git(repo, "log", "-1", "--format=%an", "worker/msg-wt").strip() == "worker"
    assert not (repo / "NOTES.md").exists()  # the main work tree is untouched
    data = report.to_json()
    assert json.dumps(data) and data["branch"] == "worker/msg-wt"


def test_use_worktree_outside_git_is_a_usage_error(workspace: Path, fake_claude: FakeAgent) -> None:
    from worker.errors import UsageError

    write_message(workspace, "msg-x")
    with pytest.raises(UsageError, match="needs a git repository"):
        run_once(load_settings(workspace), RunOptions(use_worktree=True))
    # Nothing was claimed: the message is still waiting in the inbox.
    assert (workspace / "inbox" / "msg-x.json").exists()


def test_a_failed_task_keeps_its_work_in_progress_on_the_branch(
    repo: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    fake_claude.answers({"status": "failure", "reason": "stuck"})
    write_message(repo, "msg-wip", subject="Try something")
    wrapper = fake_claude.path.read_text()
    fake_claude.path.write_text(wrapper.replace("exec ", "echo partial >> PARTIAL.md\nexec "))
    report = run_once(load_settings(repo), RunOptions(use_worktree=True, mode="code-complex"))
    assert report.outcome.value == "failure"
    subject = git(repo, "log", "-1", "--format=%s", "worker/msg-wip").strip()
    assert subject == "worker: msg-wip (work in progress): Try something"
    assert git(repo, "show", "worker/msg-wip:PARTIAL.md").strip() == "partial"
