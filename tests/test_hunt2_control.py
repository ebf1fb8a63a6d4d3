"""Hunted control-order bugs (second round), against the local GitHub server: a comment
edited into an order is not obeyed as its author's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.github_server import FakeGitHub, settings_for
from worker.config import load_settings
from worker.kernel.github_hook import GitHubControl
from worker.state.store import Store

from .test_hunt2_waits import REPO, _edit_comment
from .test_kernel_github_control import claim


@pytest.mark.parametrize("order", ["/resume", "/cancel"])
def test_a_listed_approvers_comment_edited_into_an_order_is_not_obeyed(
    workspace: Path, fake_github: FakeGitHub, order: str
) -> None:
    """Only alice may order (`[waits] approvers`). bob has write access, so GitHub lets him
    edit any comment of the repository: he turns alice's remark into `/resume` (approving a
    paused task) or `/cancel`. The comment still reads as alice's; an edited one is no order."""
    fake_github.add_repo(REPO, {"alice": "write", "bob": "write"})
    fake_github.add_issue(REPO, 7, body="Agent: Any")
    settings = load_settings(
        workspace,
        fallback={"enabled": False},
        waits={"approvers": ["alice"]},
        github=settings_for(fake_github, retries=0, control_poll_s=0),
    )
    claim(settings)
    with Store(settings.db_path) as store:  # the task was claimed a minute ago
        store.db.execute("UPDATE claims SET claimed_at = claimed_at - 60")
    remark = fake_github.add_comment(REPO, 7, "Nice progress.", login="alice", age_s=30)
    _edit_comment(fake_github, remark["id"], f"{order} now")
    [found] = GitHubControl(settings).orders()
    assert found.sender == "alice" and not found.trusted
