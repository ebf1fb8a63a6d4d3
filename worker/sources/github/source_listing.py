"""`GitHubSource`'s listing (a mixin): one conditional GET of the labelled open issues per
repository (304 = free), the selection rules of `selection`, a trust verdict cached per issue
version; `find` by task id; a repository's errors kept in `<state>/logs/github.log`.
"""

from __future__ import annotations

import builtins
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from worker.config import Settings
from worker.models import Task, TaskResult
from worker.process.proc import redact
from worker.sources.base import Listing, Skipped
from worker.sources.github import pending as github_pending
from worker.sources.github.claims import check_trust
from worker.sources.github.client import GitHubClient, GitHubError
from worker.sources.github.selection import (
    FINISHED_READ,
    issue_task,
    order,
    parse_task_id,
    screen,
    timestamp,
    up_to_max,
)
from worker.sources.github.settings import GitHubSettings
from worker.state.fsutil import replace
from worker.state.store import Store

log = logging.getLogger(__name__)


_ERROR_LOG_BYTES = 1_000_000  # github.log starts over past this (about 2,500 errors)

Issue = dict[str, Any]


class GitHubListing:
    """`GitHubSource`'s listing and `find` (a mixin: the client, the settings and the store
    are the source's; `report` sends again what is pending)."""

    name: str
    settings: Settings
    gh: GitHubSettings
    store: Store | None
    dry_run: bool
    client: GitHubClient
    _trust: dict[str, dict[str, Any]]

    if TYPE_CHECKING:

        def report(self, task: Task, result: TaskResult) -> None: ...
        def _issue_gone(self, task: Task) -> bool: ...

    # -- listing ----------------------------------------------------------------------------
    def list(self) -> Listing:
        listing = Listing(self.name)
        if not self.client.authenticated:
            listing.errors.append("github: no token; set WORKER_GITHUB_TOKEN or GITHUB_TOKEN")
            return listing
        if not self.client.polling_allowed():
            message = (
                f"github: rate limit below the floor of {self.gh.rate_limit_floor} "
                f"({self.client.rate.describe()}); polling paused until the reset"
            )
            log.warning(message)
            listing.errors.append(message)
            return listing
        pending = github_pending.retry(self.store, self.report, self._issue_gone, listing.errors)
        tasks: builtins.list[Task] = []
        for repo in self.gh.repos:
            try:
                tasks += self._list_repo(repo, listing, pending)
            except Exception as exc:  # one repository's failure is an error, not a crash
                # One short line per run; the whole error (a ConnectionError is 400
                # characters of urllib3) goes to the log file, and `-v` shows it.
                log.warning("github %s: %s", repo, exc)
                detail = getattr(exc, "detail", None) or redact(str(exc))
                log.debug("github %s: %s", repo, detail)
                self._log_error(f"github {repo}: {detail}")
                listing.errors.append(f"github {repo}: {exc}")
        listing.tasks = order(tasks)
        return listing

    def _log_error(self, text: str) -> None:
        """Append one error to `<state>/logs/github.log` (kept under 1 MB by starting it over,
        the previous one kept as `github.log.1`); nothing in a dry run."""
        if self.dry_run:
            return
        path = self.settings.logs / "github.log"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists() and path.stat().st_size > _ERROR_LOG_BYTES:
                replace(path, path.with_name("github.log.1"))
            stamp = time.strftime("%Y-%m-%d %H:%M:%S %z")
            with path.open("a", encoding="utf-8") as handle:
                handle.write(f"{stamp} {text}\n")
        except OSError as exc:
            log.debug("github: cannot write %s: %s", path, exc)

    def _list_repo(
        self, repo: str, listing: Listing, pending: set[str] | None = None
    ) -> builtins.list[Task]:
        answer = self.client.paginate(
            f"/repos/{repo}/issues",
            cache_key=f"issues:{repo}:{self.gh.label}",
            params={
                "state": "open",
                "labels": self.gh.label,
                "sort": "created",
                "direction": "asc",
                "per_page": min(100, self.gh.max_issues),
            },
            limit=self.gh.max_issues + FINISHED_READ,  # finished ones are read past: up_to_max
        )
        issues: builtins.list[Issue] = up_to_max(answer, self.gh)
        login = self.client.login() if any(i.get("assignees") for i in issues) else None
        found = []
        for issue in issues:
            try:
                task = issue_task(repo, issue)
                code, detail = self._verdict(repo, issue, task, login, pending or set())
            except GitHubError:
                raise  # the repository's error, not this issue's
            except Exception as exc:  # an answer we cannot read: skip this issue only
                where = f"{repo}#{issue.get('number', '?')}"
                listing.skipped.append(Skipped(where, "MALFORMED_ISSUE", str(exc)[:200]))
                continue
            if code is not None:
                if code != "NOT_AN_ISSUE":
                    listing.skipped.append(Skipped(task.id, code, detail))
                continue
            found.append(task)
        return found

    def _verdict(
        self, repo: str, issue: Issue, task: Task, login: str | None, pending: set[str]
    ) -> tuple[str | None, str]:
        if task.id in pending:
            return "REPORT_PENDING", "its last outcome is not yet on GitHub"
        verdict = screen(issue, self.gh, login)
        code, detail = verdict.reason_code, verdict.detail
        if code is None and self.gh.in_progress_label in task.labels:
            code, detail = self._claimed(task, issue)
        if code is None:
            trusted, why = self._trusted(repo, issue)
            if not trusted:
                code, detail = "UNTRUSTED_TRIGGER", why
        return code, detail

    def _claimed(self, task: Task, issue: Issue) -> tuple[str | None, str]:
        """A claim label: skip unless the claim may have expired (claim() makes sure)."""
        mine = self.store.claim_of(task.id) if self.store is not None else None
        if mine is not None and mine["machine_id"] == self.settings.machine_id:
            if mine["state"] == "expired" or (
                mine["state"] == "active" and mine["lease_until"] <= time.time()
            ):
                return None, ""  # our own run died: take it back
            if mine["state"] == "active":
                return "ALREADY_CLAIMED", "by this machine"
        quiet_s = time.time() - timestamp(issue.get("updated_at"))
        if quiet_s >= self.gh.claim_ttl_s:
            return None, ""
        return "ALREADY_CLAIMED", f"claim label {self.gh.in_progress_label!r}"

    def _trusted(self, repo: str, issue: Issue) -> tuple[bool, str]:
        """Trust verdict, cached per issue version (updated_at) so idle runs cost nothing."""
        key = f"github:trust:{repo}#{issue['number']}"
        stamp = {"updated_at": issue.get("updated_at"), "label": self.gh.label}
        cached = self._trust.get(key)
        if cached is None and self.store is not None:
            raw = self.store.get(key)
            cached = json.loads(raw) if raw else None
        if cached is not None and cached.get("stamp") == stamp:
            return bool(cached["trusted"]), str(cached["why"])
        trusted, why = check_trust(self.client, self.gh, repo, int(issue["number"]))
        value = {"stamp": stamp, "trusted": trusted, "why": why}
        self._trust[key] = value
        if self.store is not None:
            self.store.put(key, json.dumps(value))
        return trusted, why

    def find(self, task_id: str) -> Task | None:
        parsed = parse_task_id(task_id)
        if parsed is None or parsed[0] not in self.gh.repos:
            return None
        try:
            return issue_task(parsed[0], self.client.issue(*parsed))
        except GitHubError as exc:
            if exc.status in (404, 410):  # deleted or transferred
                return None
            raise
