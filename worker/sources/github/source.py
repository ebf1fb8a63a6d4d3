"""GitHub issues as a task source: select, claim visibly, report in one status comment.

list()    one conditional GET of the labelled open issues per repository (304 = free), the
          selection rules of `selection`, and a trust verdict cached per issue version.
claim()   local lease, then on GitHub: fresh issue, trust (label events + permission), the
          claim comment, the in-progress label, the assignment; then the claim comments are
          read again and the run backs off unless its claim is the earliest live one.
report()  push (and pull request), the same status comment updated, end-state labels.
Dry runs (store None) read but never write: not to GitHub, not to SQLite.
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import time
from typing import Any

from worker.config import Settings
from worker.delivery import PULL_REQUEST, delivery_of
from worker.models import Outcome, Task, TaskResult
from worker.process.proc import redact
from worker.sources.base import Listing, Skipped
from worker.sources.github import pending as github_pending
from worker.sources.github.authorship import commit_identity
from worker.sources.github.claims import (
    check_trust,
    create_once,
    earliest_live,
    marker,
    parse_claims,
)
from worker.sources.github.client import GitHubClient, GitHubError, make_client
from worker.sources.github.delivery import remove_label, report_to_issue
from worker.sources.github.report import claimed_body
from worker.sources.github.selection import (
    FINISHED_READ,
    SOURCE,
    issue_task,
    label_names,
    order,
    parse_task_id,
    screen,
    timestamp,
    up_to_max,
)
from worker.state.fsutil import replace
from worker.state.store import Store

_ERROR_LOG_BYTES = 1_000_000  # github.log starts over past this (about 2,500 errors)

log = logging.getLogger(__name__)

Issue = dict[str, Any]


class GitHubSource:
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

    # -- claims -----------------------------------------------------------------------------
    def claim(self, task: Task, run_id: int) -> bool:
        if self.dry_run or self.store is None:
            return False
        repo, number = task.ref["repo"], int(task.ref["number"])
        if not self.store.claim(
            task.id,
            self.name,
            self.settings.machine_id,
            os.getpid(),
            self.settings.lease_seconds,
            run_id=run_id,
            repo=repo,
            number=number,
        ):
            return False
        try:
            code = self._claim_remote(task, repo, number, run_id)
        except Exception as exc:  # GitHubError, or an answer we cannot read: not taken
            code = f"CLAIM_FAILED: {redact(str(exc))}"
        if code is None:
            return True
        log.warning("github: not taking %s: %s", task.id, code)
        self.store.release_claim(task.id, "released")
        return False

    def _claim_remote(self, task: Task, repo: str, number: int, run_id: int) -> str | None:
        client, gh = self.client, self.gh
        issue = client.issue(repo, number)
        if issue.get("state") != "open" or issue.get("locked"):
            return "ISSUE_CLOSED" if issue.get("state") != "open" else "ISSUE_LOCKED"
        trusted, why = check_trust(client, gh, repo, number)
        if not trusted:
            return f"UNTRUSTED_TRIGGER: {why}"
        login = client.login()
        me, run = self.settings.machine_id, str(run_id)
        path = f"/repos/{repo}/issues/{number}/comments"

        def others(claims: builtins.list[Any]) -> set[int]:
            # Our earlier runs are dead or done: we hold the local lease now.
            return {c.comment_id for c in claims if c.machine == me and c.run != run}

        claims = parse_claims(client.comments(repo, number), task.id, login)
        holder = earliest_live(claims, gh.claim_ttl_s, ignore=others(claims))
        if holder is not None:
            return f"ALREADY_CLAIMED by {holder.machine} (run {holder.run})"
        head = marker(me, task.id, run)

        def find_mine() -> dict[str, Any] | None:
            for comment in client.comments(repo, number):
                if str(comment.get("body", "")).startswith(head):
                    return comment
            return None

        comment = create_once(
            client, ("POST", path, {"body": claimed_body(head, me, run)}), find_mine
        )
        try:
            client.request(
                "POST",
                f"/repos/{repo}/issues/{number}/labels",
                body={"labels": [gh.in_progress_label]},
            )
            for label in set(gh.end_labels) & set(label_names(issue)):
                self._remove_label(repo, number, label)
            if gh.assign and login:
                try:
                    client.request(
                        "POST",
                        f"/repos/{repo}/issues/{number}/assignees",
                        body={"assignees": [login]},
                    )
                except GitHubError as exc:  # not allowed with this token: the label is enough
                    log.info("github: cannot assign %s: %s", task.id, exc)
            claims = parse_claims(client.comments(repo, number), task.id, login)
        except Exception:
            # Half a claim: withdraw it, or it would keep every machine off for claim_ttl_s.
            self._withdraw(repo, number, comment, had_label=gh.in_progress_label in task.labels)
            raise
        holder = earliest_live(claims, gh.claim_ttl_s, ignore=others(claims))
        if holder is not None and holder.comment_id != int(comment["id"]):
            client.request("DELETE", f"/repos/{repo}/issues/comments/{comment['id']}")
            return f"ALREADY_CLAIMED by {holder.machine} (run {holder.run}), claimed first"
        task.ref.update(comment_id=int(comment["id"]), run=run)
        self._renewed[task.id] = time.time()
        return None

    def _withdraw(self, repo: str, number: int, comment: Issue, had_label: bool) -> None:
        """Best effort: delete our claim comment, and the claim label unless it was there."""
        try:
            self.client.request("DELETE", f"/repos/{repo}/issues/comments/{comment['id']}")
            if not had_label:
                self._remove_label(repo, number, self.gh.in_progress_label)
        except Exception as exc:  # the claim then expires after claim_ttl_s
            log.warning("github: could not withdraw the claim on %s#%s: %s", repo, number, exc)

    def renew(self, task: Task) -> None:
        if self.store is None:
            return
        self.store.renew_claim(task.id, self.settings.lease_seconds)
        last = self._renewed.get(task.id, 0.0)
        comment_id = task.ref.get("comment_id")
        # The comment's update time is the claim's heartbeat; a quarter of the TTL is enough.
        if comment_id is None or time.time() - last < self.gh.claim_ttl_s / 4:
            return
        head = marker(self.settings.machine_id, task.id, task.ref.get("run", "?"))
        body = claimed_body(head, self.settings.machine_id, task.ref.get("run", "?"))
        try:
            self.client.request(
                "PATCH",
                f"/repos/{task.ref['repo']}/issues/comments/{comment_id}",
                body={"body": body},
            )
            self._renewed[task.id] = time.time()
        except GitHubError as exc:
            log.warning("github: could not renew the claim of %s: %s", task.id, exc)

    def release(self, task: Task, result: TaskResult) -> None:
        if self.store is not None:
            state = "released" if result.outcome is Outcome.STOPPED else result.outcome.value
            self.store.release_claim(task.id, state)

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

    def _remove_label(self, repo: str, number: int, label: str) -> None:
        remove_label(self.client, repo, number, label)
