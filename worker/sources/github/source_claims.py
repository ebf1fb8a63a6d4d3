"""`GitHubSource`'s claims (a mixin): a local lease, then on GitHub a fresh issue, trust (label
events and permission), the claim comment, the in-progress label, the assignment; the claim
comments read again, and the run backs off unless its claim is the earliest live one. The
comment's update time is the claim's heartbeat (`renew`).
"""

from __future__ import annotations

import builtins
import logging
import os
import time
from typing import Any

from worker.config import Settings
from worker.models import Outcome, Task, TaskResult
from worker.process.proc import redact
from worker.sources.github.claims import (
    check_trust,
    create_once,
    earliest_live,
    marker,
    parse_claims,
)
from worker.sources.github.client import GitHubClient, GitHubError
from worker.sources.github.delivery import remove_label
from worker.sources.github.report import claimed_body
from worker.sources.github.selection import label_names
from worker.sources.github.settings import GitHubSettings
from worker.sources.github.source_listing import Issue
from worker.state.store import Store

log = logging.getLogger(__name__)


class GitHubClaims:
    """`GitHubSource`'s claims (a mixin: the client, the settings and the store are the
    source's)."""

    name: str
    settings: Settings
    gh: GitHubSettings
    store: Store | None
    dry_run: bool
    client: GitHubClient
    _renewed: dict[str, float]

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

    def _remove_label(self, repo: str, number: int, label: str) -> None:
        remove_label(self.client, repo, number, label)
