"""Hunted GitHub bugs (second round), against the local server answering (and paging) like
the REST API: finished issues that keep the trigger label do not hide new work."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.github_server import FakeGitHub, make_source

REPO = "acme/app"


def test_a_new_issue_behind_a_hundred_finished_ones_is_taken_with_the_default_max_issues(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    """Finished and waiting issues stay open with the trigger label (worker adds
    `worker:done`, `worker:failed` or `worker:waiting`), and the listing is oldest first. With
    the default `max_issues` (100), once a repository has 100 of them a new labelled issue sat
    past the issues read and was never seen: `max_issues` counts the issues that may be work."""
    for number in range(1, 101):
        end = ("worker:done", "worker:failed", "worker:waiting")[number % 3]
        fake_github.add_issue(REPO, number, labels=("roo-schedulable", end), age_s=9000)
    fake_github.add_issue(REPO, 101, body="Agent: Any", labels=("roo-schedulable",), age_s=60)
    listing = make_source(tmp_path / "ws", fake_github).list()
    assert [t.id for t in listing.tasks] == [f"{REPO}#101"]
    assert not listing.errors
