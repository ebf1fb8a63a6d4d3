"""Delivering a task's end to its issue: push, pull request, status comment, labels.

Each step is tolerant of the others: a failed push is said in the comment, a failed comment
still lets the labels show the end state; what failed is raised at the end as one GitHubError.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from worker.config import Settings
from worker.models import Outcome, Task, TaskResult
from worker.process.gitview import main_checkout, run_git
from worker.process.proc import redact
from worker.sources.github.authorship import question, reply_on_pull
from worker.sources.github.claims import create_once, find_own, marker, parse_claims
from worker.sources.github.client import GitHubClient, GitHubError, token_from_env
from worker.sources.github.pull_request import ENDED, follow_pull_request, open_pull_request
from worker.sources.github.remote import bring_base_in, git_host, push_branch, remote_url
from worker.sources.github.report import end_label, result_body

__all__ = [
    "ENDED",
    "bring_base_in",
    "delete_branch",
    "follow_pull_request",
    "git_host",
    "open_pull_request",
    "push_branch",
    "remote_url",
    "remove_label",
    "report_to_issue",
]


def report_to_issue(
    client: GitHubClient, settings: Settings, task: Task, result: TaskResult, *, open_pr: bool
) -> None:
    """Push (and open the pull request), update the status comment in place, set the
    end-state label, drop the claim label. Raises GitHubError naming what failed."""
    gh = settings.github
    repo, number = task.ref["repo"], int(task.ref["number"])
    errors: list[str] = []
    try:
        if ENDED in result.reason_codes:  # merged or closed: the branch has served
            notes = delete_branch(settings, result.branch, repo)
        else:
            notes = _deliver(client, settings, task, result, open_pr)
    except Exception as exc:  # an unreadable answer: the comment and labels still go out
        notes = [f"⚠️ could not deliver the branch: {redact(str(exc))}"]
    notes = question(result) + notes
    follow_pull_request(gh, result)
    try:
        _write_status(client, settings.machine_id, task, repo, number, result, notes)
    except GitHubError as exc:
        errors.append(str(exc))
    label = end_label(gh, result.outcome)
    try:
        present: set[str] = set()
        if label is not None:
            labels = client.request(
                "POST", f"/repos/{repo}/issues/{number}/labels", body={"labels": [label]}
            ).data
            present = {str(x.get("name")) for x in labels or [] if isinstance(x, dict)}
        # A resumed task ends without a new claim: its earlier end state (waiting) goes too.
        stale = (set(gh.end_labels) & present) - {label}
        for old in (gh.in_progress_label, *sorted(stale)):
            remove_label(client, repo, number, old)
        login = client.login()
        if result.outcome is Outcome.STOPPED and login:  # available again, to anyone
            client.request(
                "DELETE",
                f"/repos/{repo}/issues/{number}/assignees",
                body={"assignees": [login]},
            )
    except GitHubError as exc:
        errors.append(str(exc))
    if errors:
        raise GitHubError(f"report of {task.id}: " + "; ".join(errors))


def _deliver(
    client: GitHubClient, settings: Settings, task: Task, result: TaskResult, open_pr: bool
) -> list[str]:
    """Push the branch and open the pull request; what happened, as notes for the comment."""
    if result.outcome is not Outcome.SUCCESS or not result.branch or not settings.github.push:
        return []
    error = push_branch(
        settings.github, settings.workspace, result.branch, token_from_env(), repo=task.ref["repo"]
    )
    if error is not None:
        return [f"⚠️ {error}"]
    notes = [f"Branch `{result.branch}` pushed."]
    if open_pr or "pr" in task.ref:  # a pull request once opened stays the task's
        try:
            pull = open_pull_request(
                client, settings.github, task, result.branch, result, settings.workspace
            )
            url = str(pull.get("html_url") or pull.get("url") or "")
            head = (pull.get("head") or {}).get("sha")
            base = (pull.get("base") or {}).get("ref")
            result.pull_request = {
                "number": int(pull["number"]),
                "url": url,
                "head": head,
                "base": base,
            }
            notes.append(f"Pull request: {url}")
            if "pr" in task.ref:  # a round of fixes: said on the pull request too
                reply_on_pull(client, task, result)
        except Exception as exc:  # GitHubError, or an answer we cannot read
            notes.append(f"⚠️ could not open a pull request: {redact(str(exc))}")
    return notes


def _write_status(
    client: GitHubClient,
    me: str,
    task: Task,
    repo: str,
    number: int,
    result: TaskResult,
    notes: list[str],
) -> None:
    comment_id = task.ref.get("comment_id")
    run = str(task.ref.get("run") or "?")
    path = f"/repos/{repo}/issues/{number}/comments"
    login = client.login()
    if comment_id is None:  # e.g. a task resumed from an older wait state: find ours
        own = find_own(parse_claims(client.comments(repo, number), task.id, login), me)
        comment_id, run = (own.comment_id, own.run) if own else (None, run)
    state = "released" if result.outcome is Outcome.STOPPED else result.outcome.value
    head = marker(me, task.id, run, state=state)
    body = result_body(head, me, run, result, notes)
    if comment_id is not None:
        try:
            client.request(
                "PATCH", f"/repos/{repo}/issues/comments/{comment_id}", body={"body": body}
            )
            return
        except GitHubError as exc:
            if exc.status != 404:
                raise
    active = marker(me, task.id, run)

    def find_mine() -> dict[str, Any] | None:
        for comment in client.comments(repo, number):
            if str(comment.get("body", "")).startswith((head, active)):
                return comment
        return None

    created = create_once(client, ("POST", path, {"body": body}), find_mine)
    if not str(created.get("body", "")).startswith(head):
        client.request(
            "PATCH", f"/repos/{repo}/issues/comments/{created['id']}", body={"body": body}
        )


def delete_branch(settings: Settings, branch: str | None, repo: str | None = None) -> list[str]:
    """The task's branch deleted on the remote and in the workspace, once its pull request is
    merged or closed; what happened, as notes for the status comment. A branch GitHub deleted
    already (the repository's "delete head branches") is no error."""
    if not branch or not branch.startswith("worker/"):
        return []
    error = None
    if settings.github.push:
        token = token_from_env()
        error = push_branch(settings.github, settings.workspace, branch, token, True, repo=repo)
    if error is not None and "remote ref does not exist" not in error:
        return [f"⚠️ {error}"]
    checkout = main_checkout(settings.workspace)
    if checkout is not None:
        run_git(checkout, "update-ref", "-d", f"refs/heads/{branch}")
    return [f"Branch `{branch}` deleted."]


def remove_label(client: GitHubClient, repo: str, number: int, label: str) -> None:
    """Remove `label` from the issue; a label that is not there is fine."""
    try:
        client.request("DELETE", f"/repos/{repo}/issues/{number}/labels/{quote(label, safe='')}")
    except GitHubError as exc:
        if exc.status != 404:  # not there: nothing to remove
            raise
