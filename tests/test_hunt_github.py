"""Hunted GitHub bugs, against the local server answering (and paging) like the REST API."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.github_server import FakeGitHub, make_source

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
