"""Faults of the GitHub API: retried when worth it, else a clear error for this source only."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.fakes.github_server import FakeGitHub, make_source
from worker.sources.github.client import GitHubError, make_client
from worker.sources.github.settings import GitHubSettings

REPO = "acme/app"
ISSUES = r"/repos/acme/app/issues$"


@pytest.fixture
def server(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_issue(REPO, 1, labels=("roo-schedulable",))
    return fake_github


@pytest.mark.parametrize("status", [500, 502])
def test_server_errors_are_retried(server: FakeGitHub, tmp_path: Path, status: int) -> None:
    server.fail("GET", ISSUES, status, times=2)
    listing = make_source(tmp_path / "ws", server).list()
    assert [t.id for t in listing.tasks] == [f"{REPO}#1"] and listing.errors == []
    assert server.count("GET", ISSUES) == 3


def test_a_timeout_is_retried(server: FakeGitHub, tmp_path: Path) -> None:
    server.fail("GET", ISSUES, 200, delay=1.5, apply_first=True)  # the client gives up at 1 s
    listing = make_source(tmp_path / "ws", server).list()
    assert [t.id for t in listing.tasks] == [f"{REPO}#1"] and listing.errors == []


def test_a_lasting_failure_is_an_error_of_this_source_not_an_exception(
    server: FakeGitHub, tmp_path: Path
) -> None:
    server.fail("GET", ISSUES, 502, times=100)
    source = make_source(tmp_path / "ws", server, retries=2)
    listing = source.list()
    assert listing.tasks == []
    assert listing.errors == [f"github {REPO}: GET /repos/{REPO}/issues: HTTP 502 Server Error"]
    assert server.count("GET", ISSUES) == 3


def test_one_broken_repository_does_not_hide_the_others(server: FakeGitHub, tmp_path: Path) -> None:
    server.add_repo("acme/other", {"maintainer": "write"})
    server.add_issue("acme/other", 4, labels=("roo-schedulable",))
    source = make_source(tmp_path / "ws", server, repos=["acme/gone", "acme/other"])
    listing = source.list()
    assert [t.id for t in listing.tasks] == ["acme/other#4"]
    assert len(listing.errors) == 1 and "acme/gone" in listing.errors[0]
    assert "HTTP 404" in listing.errors[0]


def test_rate_limit_exhausted_is_not_retried_and_polling_pauses(
    server: FakeGitHub, tmp_path: Path
) -> None:
    """403 with X-RateLimit-Remaining: 0: an error naming the reset; the next run (same
    SQLite) does not even ask until the reset."""
    server.fail(
        "GET",
        ISSUES,
        403,
        message="API rate limit exceeded for user ID 1.",
        headers={"X-RateLimit-Remaining": "0"},
    )
    source = make_source(tmp_path / "ws", server)
    listing = source.list()
    assert len(listing.errors) == 1 and "rate limit exhausted until" in listing.errors[0]
    assert server.count("GET", ISSUES) == 1  # no retry against an exhausted limit
    source.store.close()
    later = make_source(tmp_path / "ws", server)
    listing = later.list()
    assert "polling paused until the reset" in listing.errors[0]
    assert server.count("GET", ISSUES) == 1


def test_below_the_floor_polling_stops_until_the_reset(server: FakeGitHub, tmp_path: Path) -> None:
    server.remaining = 50
    source = make_source(tmp_path / "ws", server, rate_limit_floor=100)
    assert source.list().tasks  # the first answer tells how much is left
    requests = len(server.log)
    listing = source.list()
    assert listing.tasks == [] and "below the floor of 100" in listing.errors[0]
    assert len(server.log) == requests
    source.client.rate.reset = time.time() - 1  # the reset has passed
    assert source.list().tasks


def test_secondary_rate_limit_waits_for_retry_after(server: FakeGitHub, tmp_path: Path) -> None:
    server.fail(
        "GET",
        ISSUES,
        403,
        headers={"Retry-After": "0"},
        message="You have exceeded a secondary rate limit. Please retry later.",
    )
    listing = make_source(tmp_path / "ws", server).list()
    assert listing.tasks and listing.errors == []
    assert server.count("GET", ISSUES) == 2


def test_retry_after_longer_than_allowed_is_an_error(server: FakeGitHub, tmp_path: Path) -> None:
    server.fail("GET", ISSUES, 429, headers={"Retry-After": "3600"})
    listing = make_source(tmp_path / "ws", server, max_retry_after_s=60).list()
    assert listing.errors and "HTTP 429" in listing.errors[0]
    assert server.count("GET", ISSUES) == 1


def test_deleted_issue_cannot_be_found_or_claimed(server: FakeGitHub, tmp_path: Path) -> None:
    source = make_source(tmp_path / "ws", server)
    task = source.list().tasks[0]
    del server.repos[REPO]["issues"][1]
    assert source.find(f"{REPO}#1") is None
    assert source.claim(task, run_id=1) is False
    assert source.store.claim_of(f"{REPO}#1")["state"] == "released"


def test_client_for_the_waits_engineer(server: FakeGitHub) -> None:
    """The shared client: conditional GETs, trust check, errors without the token."""
    settings = GitHubSettings(
        base_url=server.url, backoff_s=0, seconds_between_requests=0, seconds_between_writes=0
    )
    client = make_client(settings)
    first = client.get(f"/repos/{REPO}/issues/1", cache_key="issue-1")
    again = client.get(f"/repos/{REPO}/issues/1", cache_key="issue-1")
    assert not first.not_modified and again.not_modified and again.data["number"] == 1
    assert client.has_write_access(REPO, "maintainer")
    assert not client.has_write_access(REPO, "stranger")
    assert client.login() == "worker-bot"
    with pytest.raises(GitHubError) as info:
        client.request("GET", f"/repos/{REPO}/issues/999")
    assert info.value.status == 404
    bad = make_client(settings, token="wrong-token-123456")
    with pytest.raises(GitHubError) as info:
        bad.request("GET", f"/repos/{REPO}")
    assert info.value.status == 401 and "wrong-token" not in str(info.value)


def test_without_a_token_the_source_says_so(
    server: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    listing = make_source(tmp_path / "ws", server).list()
    assert listing.tasks == [] and "no token" in listing.errors[0]
    assert server.log == []
