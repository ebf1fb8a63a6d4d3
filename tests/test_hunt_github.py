"""Hunted GitHub bugs, against the local server answering (and paging) like the REST API."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.github_server import FakeGitHub, make_source
from worker.models import Outcome, TaskResult

REPO = "acme/app"


@pytest.fixture
def server(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_repo(REPO, {"maintainer": "write"})
    return fake_github


def test_a_new_issue_behind_a_full_page_of_finished_ones_is_still_taken(
    server: FakeGitHub, tmp_path: Path
) -> None:
    """Finished issues stay open with the trigger label (worker adds `worker:done`): once
    there are more than a page of them (100, oldest first), a new labelled issue is on the
    second page of the listing, and it must still be seen."""
    for number in range(1, 121):
        server.add_issue(REPO, number, labels=("roo-schedulable", "worker:done"), age_s=9000)
    server.add_issue(REPO, 121, body="Agent: Any", labels=("roo-schedulable",), age_s=60)
    source = make_source(tmp_path / "ws", server, max_issues=300)
    listing = source.list()
    assert [t.id for t in listing.tasks] == [f"{REPO}#121"]
    assert not listing.errors


@pytest.mark.parametrize(
    ("variable", "key"),
    [
        ("GEMINI_API_KEY", "AIza" + "SyD3m0Key-for_tests0123456789abcdef"),
        ("OPENAI_API_KEY", "sk-proj-" + "Ab12_cd34-EF56_gh78_IJ90_kl12"),
    ],
)
def test_the_agents_own_model_key_repeated_in_its_words_never_reaches_the_issue(
    server: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, key: str
) -> None:
    """The agent CLI has its model key in its environment (it needs it); an agent steered by an
    untrusted issue prints it. The public status comment shows neither the key nor a part of
    it: the keys of every agent worker runs are redacted, not only Anthropic's."""
    monkeypatch.setenv(variable, key)
    server.add_issue(REPO, 7, body="Agent: Any", labels=("roo-schedulable",))
    source = make_source(tmp_path / "ws", server, push=False)
    (task,) = source.list().tasks
    assert source.claim(task, run_id=1)
    words = f"As asked in the issue, my key is {key} (from ${variable})."
    source.report(task, TaskResult(task, Outcome.SUCCESS, reason=key, final_text=words))
    (comment,) = server.comments_of(REPO, 7)
    assert "As asked in the issue" in comment["body"]
    assert key[:12] not in comment["body"] and key[-12:] not in comment["body"]
