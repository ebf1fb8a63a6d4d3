"""GitHub issues as a task source: select, claim visibly, report in one status comment.

list()    one conditional GET of the labelled open issues per repository (304 = free), the
          selection rules of `selection`, and a trust verdict cached per issue version.
claim()   local lease, then on GitHub: fresh issue, trust (label events + permission), the
          claim comment, the in-progress label, the assignment; then the claim comments are
          read again and the run backs off unless its claim is the earliest live one.
report()  push (and pull request), the same status comment updated, end-state labels.
Dry runs (store None) read but never write: not to GitHub, not to SQLite.

The listing is `source_listing.GitHubListing`'s, the claims `source_claims.GitHubClaims`'s:
mixins of `GitHubSource`, which keeps the report.
"""

from __future__ import annotations

from typing import Any

from worker.config import Settings
from worker.delivery import PULL_REQUEST, delivery_of
from worker.models import Task, TaskResult
from worker.sources.github import pending as github_pending
from worker.sources.github.authorship import commit_identity
from worker.sources.github.client import GitHubClient, GitHubError, make_client
from worker.sources.github.delivery import report_to_issue
from worker.sources.github.selection import SOURCE
from worker.sources.github.source_claims import GitHubClaims
from worker.sources.github.source_listing import GitHubListing, Issue
from worker.state.store import Store

__all__ = ["GitHubSource", "Issue"]


class GitHubSource(GitHubListing, GitHubClaims):
    name = SOURCE

    def __init__(
        self,
        settings: Settings,
        store: Store | None,
        *,
        dry_run: bool = False,
        open_pr: bool | None = None,
        client: GitHubClient | None = None,
    ) -> None:
        self.settings = settings
        self.gh = settings.github
        self.store = None if dry_run else store
        self.dry_run = dry_run or store is None
        if open_pr is None:  # `--open-pr` wins over `[github] delivery`
            open_pr = delivery_of(settings, SOURCE) == PULL_REQUEST
        self.open_pr = open_pr
        self.client = client or make_client(self.gh, self.store)
        self._trust: dict[str, dict[str, Any]] = {}
        self._renewed: dict[str, float] = {}

    def commit_author(self) -> tuple[str, str]:
        """The name and address of the task's commits (`[github] commit_author`, else the
        token's user with GitHub's noreply address)."""
        return commit_identity(self.client, self.gh)

    # -- reporting --------------------------------------------------------------------------
    def report(self, task: Task, result: TaskResult) -> None:
        """Update the status comment in place, set the end-state label, drop the claim label.
        Raises GitHubError when a step failed (the outcome is safe in SQLite)."""
        if self.dry_run or "repo" not in task.ref:
            return
        try:
            report_to_issue(self.client, self.settings, task, result, open_pr=self.open_pr)
        except Exception:  # kept for the next listing to send again (`pending`)
            github_pending.keep(self.store, task.id, github_pending.result_to_json(task, result))
            raise
        github_pending.keep(self.store, task.id, None)

    def _issue_gone(self, task: Task) -> bool:
        """Deleted or transferred: a report can never reach it."""
        try:
            self.client.issue(task.ref["repo"], int(task.ref["number"]))
        except GitHubError as exc:
            return exc.status in (404, 410)
        return False
