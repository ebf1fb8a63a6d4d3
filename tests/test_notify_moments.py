"""A pull request's moments reach Telegram as they happen, each with its link and its reason,
each once: opened, ready for review, merged, closed; checks failed past the follow-up limit;
and a "needs approval" that says why a person is asked. End to end through `run_once`, the
fake claude, the project's fake GitHub and a fake Telegram Bot API on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import FakeAgent
from tests.fakes.bot_api import FakeBotAPI
from tests.fakes.github_server import FakeGitHub
from tests.test_github_pull_requests import _workspace as pr_workspace
from worker.config import load_settings
from worker.operator.notify import moments
from worker.run.runner import RunOptions, RunReport, run_once
from worker.state.store import Store

REPO, TASK, CHAT = "acme/app", "acme/app#7", 4242
URL = "https://github.com/acme/app/pull/1000"


@pytest.fixture
def server(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_issue(
        REPO, 7, title="Fix the parser", labels=("roo-schedulable",), body="Agent: Any\n\nFix it."
    )
    return fake_github


def _workspace(tmp_path: Path, server: FakeGitHub, bot: FakeBotAPI, **github: Any) -> Path:
    """The pull requests' workspace (tests/test_github_pull_requests.py), told on Telegram."""
    ws = pr_workspace(tmp_path, server, **github)
    told = ["[notify.telegram]", f"chat_ids = [{CHAT}]", f'api_base = "{bot.url}"']
    with (ws / "worker.toml").open("a", encoding="utf-8") as toml:
        toml.write("\n".join(told) + "\n")
    return ws


def _run(ws: Path) -> RunReport:
    return run_once(load_settings(ws), RunOptions(use_worktree=True))


def _open(ws: Path, server: FakeGitHub, fake_claude: FakeAgent) -> dict[str, Any]:
    fake_claude.answers(
        {
            "status": "success",
            "reason": "parser fixed: the off-by-one in parse()",
            "files": [{"path": "parser.py", "text": "def parse(): return 1\n"}],
        }
    )
    assert _run(ws).outcome.value == "waiting"
    pull = server.pull_of(REPO, 1000)
    assert pull is not None
    return pull


def _texts(bot: FakeBotAPI) -> list[str]:
    return [m["text"] for m in bot.sent() if m["chat_id"] == CHAT]


def test_opened_ready_and_merged_are_each_told_once_with_link_and_reason(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent, bot: FakeBotAPI
) -> None:
    ws = _workspace(tmp_path, server, bot)
    pull = _open(ws, server, fake_claude)
    [opened] = _texts(bot)
    assert "pull request #1000 opened" in opened and URL in opened
    assert "parser fixed: the off-by-one" in opened  # the reason: what the agent did
    assert TASK in opened
    # Checks running: nothing to tell, at any number of runs.
    server.set_checks(REPO, pull["head"]["sha"], runs=[("tests", "in_progress", None, "")])
    _run(ws)
    _run(ws)
    assert len(_texts(bot)) == 1
    # Green, nothing asked: ready for review, told once however many runs look.
    server.set_checks(REPO, pull["head"]["sha"], runs=[("tests", "completed", "success", "")])
    _run(ws)
    _run(ws)
    ready = _texts(bot)[1:]
    assert len(ready) == 1 and "#1000 is ready for review" in ready[0] and URL in ready[0]
    assert "checks passed" in ready[0]
    # Merged by a person: told with who merged it.
    server.close_pull(REPO, 1000, "maintainer", merged=True)
    _run(ws)
    _run(ws)
    merged = _texts(bot)[2:]
    assert len(merged) == 1 and "#1000 merged" in merged[0]
    assert "merged by maintainer" in merged[0] and URL in merged[0]


def test_a_pull_request_closed_unmerged_is_told_with_who_closed_it(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent, bot: FakeBotAPI
) -> None:
    ws = _workspace(tmp_path, server, bot)
    _open(ws, server, fake_claude)
    server.close_pull(REPO, 1000, "maintainer")
    _run(ws)
    closed = _texts(bot)[1:]
    assert len(closed) == 1 and "#1000 closed unmerged" in closed[0]
    assert "closed by maintainer" in closed[0] and URL in closed[0]


def test_a_dry_run_tells_no_moment(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent, bot: FakeBotAPI
) -> None:
    """A dry run looks without a store: nothing is queued, nothing sent."""
    ws = _workspace(tmp_path, server, bot)
    _open(ws, server, fake_claude)
    server.close_pull(REPO, 1000, "maintainer", merged=True)
    run_once(load_settings(ws), RunOptions(use_worktree=True, dry_run=True))
    assert len(_texts(bot)) == 1  # the opening only


def test_needs_approval_past_the_follow_up_limit_names_the_reason(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent, bot: FakeBotAPI
) -> None:
    ws = _workspace(tmp_path, server, bot, max_follow_ups=1)
    pull = _open(ws, server, fake_claude)
    server.set_checks(REPO, pull["head"]["sha"], runs=[("tests", "completed", "failure", "E")])
    fake_claude.answers({"status": "success", "reason": "test fixed"})
    assert _run(ws).outcome.value == "waiting"
    [asked] = [t for t in _texts(bot) if "needs approval" in t]
    assert "round(s) of fixes" in asked and "max_follow_ups = 1" in asked  # why a person
    assert "#1000" in asked and f"/approve {TASK}" in asked
    assert URL in asked  # the link to look at before deciding


def _pull(ws: Path, store: Store, rounds: int) -> Any:
    """What `waits.github_pr` hands the moments: its settings, store, wait and the pull."""
    settings = load_settings(ws)
    state = SimpleNamespace(
        task_id=TASK, task_title="Fix the parser", source_ref={"repo": REPO, "prRounds": rounds}
    )
    return SimpleNamespace(
        ctx=SimpleNamespace(settings=settings, lookups=SimpleNamespace(store=store)),
        wait=SimpleNamespace(state=state),
        repo=REPO,
        number=1000,
        data={"html_url": URL, "head": {"sha": "a" * 40}},
    )


def test_checks_failed_are_told_only_past_the_follow_up_limit(
    tmp_path: Path, server: FakeGitHub, bot: FakeBotAPI
) -> None:
    """Within the limit the agent fixes them itself (nobody is told); past it a person is,
    with the failing checks' names, once per head commit."""
    ws = _workspace(tmp_path, server, bot, max_follow_ups=2)
    failed = ["### tests (failure)\nAssertionError", "### lint (failure)\nE501"]
    with Store(load_settings(ws).db_path) as store:
        assert not moments.looked(_pull(ws, store, 1), failed, ready=False)
        assert moments.looked(_pull(ws, store, 2), failed, ready=False)
        assert not moments.looked(_pull(ws, store, 3), failed, ready=False)  # same head
        assert not moments.looked(_pull(ws, None, 3), failed, ready=False)  # type: ignore[arg-type]
    [told] = _texts(bot)
    assert "checks failed past the follow-up limit" in told
    assert "tests (failure), lint (failure)" in told and "2 round(s)" in told and URL in told
