"""Delivering a task's end to its issue: push, pull request, status comment, labels.

Each step is tolerant of the others: a failed push is said in the comment, a failed comment
still lets the labels show the end state; what failed is raised at the end as one GitHubError.
"""

from __future__ import annotations

import contextlib
import logging
import re
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from worker.config import Settings
from worker.models import Outcome, Task, TaskResult
from worker.process.gitsafe import git_argv, merge_from, push_credentials, scratch_repo
from worker.process.gitview import base_env, main_checkout, run_git, worktree_checkout
from worker.process.proc import redact, run_process
from worker.process.workspace_git import identity
from worker.sources.github.authorship import (
    changed_files,
    commit_identity,
    pull_request_body,
    question,
    reply_on_pull,
)
from worker.sources.github.claims import create_once, find_own, marker, parse_claims
from worker.sources.github.client import GitHubClient, GitHubError, token_from_env
from worker.sources.github.report import end_label, result_body
from worker.sources.github.settings import GitHubSettings, held_reason, next_round

log = logging.getLogger(__name__)

# A task its pull request ended (merged, closed; `worker.waits.ledger.WaitCode.PR_ENDED`):
# nothing to deliver, its branch to delete.
ENDED = "PR_ENDED"


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


def follow_pull_request(settings: GitHubSettings, result: TaskResult) -> None:
    """A task that opened (or updated) its pull request is not done: it waits on the pull
    request, for its checks, its reviews and its merge (`worker.waits.github_pr`)."""
    pull = result.pull_request
    if pull is None or result.outcome is not Outcome.SUCCESS or ENDED in result.reason_codes:
        return
    if not settings.follow_pull_requests:
        return
    result.outcome = Outcome.WAITING
    result.reason_codes.append("PR_FOLLOWED")
    said = f"{result.reason.rstrip('.')}. " if result.reason else ""
    rounds, ref = next_round(result.task.ref), result.task.ref
    if rounds >= settings.follow_limit(ref):  # the status comment asks the person, in the open
        result.reason = f"{said}{held_reason(pull['number'], rounds, settings.max_follow_ups)}"
        return
    result.reason = (
        f"{said}Pull request #{pull['number']} is open: worker follows its checks, reviews "
        "and merge, and resumes the task when they need work."
    )


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


def remote_url(settings: GitHubSettings, repo: str | None) -> str | None:
    """Where worker pushes and fetches: `[github] remote` when it is a URL or a path, else (a
    remote's name, `origin` by default) the issue's repository on the GitHub host, over https.
    Never a remote of the workspace's `.git/config`, which the agent can write."""
    remote = settings.remote
    if "://" in remote or re.match(r"[^/:]+@[^/:]+:", remote) or Path(remote).is_absolute():
        return remote
    return f"https://{git_host(settings)}/{repo}.git" if repo else None


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


def push_branch(
    settings: GitHubSettings,
    workspace: Any,
    branch: str,
    token: str | None,
    delete: bool = False,
    *,
    repo: str | None = None,
) -> str | None:
    """Push `branch` to worker's remote (`remote_url`; `delete`: delete it there); returns an
    error text, None when pushed. The push runs from a scratch repository of worker's own; the
    token reaches git only through a one-shot credential helper (`worker.process.gitsafe`)."""
    env = base_env()
    url = remote_url(settings, repo)
    checkout = main_checkout(Path(workspace))
    if url is None or checkout is None:
        return f"git push {branch}: no repository to push to; set [github] remote to its URL"
    if token and url.lower().startswith("http://"):
        return redact(f"git push {url} {branch}: refused, the token never goes over http")
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(scratch_repo(checkout, branch, env))
        config = _credentials(stack, settings, url, token)
        refspec = f":refs/heads/{branch}" if delete else f"{branch}:refs/heads/{branch}"
        args = ["push", url, refspec]
        proc = run_process(git_argv(*config, *args), cwd=scratch, timeout_s=300, env=env)
    if proc.exit_code == 0:
        return None
    tail = proc.stderr_tail.strip().splitlines()[-3:] or ["(no output)"]
    return redact(f"git push {url} {branch} failed: {' / '.join(tail)}")


def _credentials(
    stack: contextlib.ExitStack[Any], settings: GitHubSettings, url: str, token: str | None
) -> list[str]:
    """git's `-c` options for the one-shot credential helper, for the call `stack` holds:
    over https with a token only (never over plain http)."""
    if token and url.lower().startswith("https://"):
        return stack.enter_context(push_credentials(token, git_host(settings)))
    return []


def bring_base_in(
    settings: GitHubSettings,
    cwd: Path,
    base: str,
    token: str | None,
    *,
    workspace: Path,
    branch: str,
    repo: str | None = None,
) -> str:
    """Merge the pull request's base into its branch checked out at `cwd` (a task worktree of
    `workspace`), before the agent resolves a conflict; what happened, in one sentence for
    the agent's prompt. Conflicts stay in the files with their markers (the merge is in
    progress: the agent's commit, or worker's at the end of the task, concludes it).

    The base is fetched from worker's remote (`remote_url`) into a scratch repository of
    worker's own (with the one-shot credential over https), then merged through worker's view
    of the worktree: no configuration of the agent's is read (no merge driver, no filter)."""
    env = base_env()
    url = remote_url(settings, repo)
    checkout = worktree_checkout(workspace, cwd, branch)
    if url is None or checkout is None:
        return "worker could not fetch the base: set [github] remote to the repository's URL"
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="worker-fetch-"))
        run_process(git_argv("init", "-q", "--bare", scratch), cwd=cwd, timeout_s=60, env=env)
        config = _credentials(stack, settings, url, token)
        ref = f"+refs/heads/{base}:refs/heads/{base}"
        got = run_process(
            git_argv(*config, "fetch", "-q", url, ref), cwd=Path(scratch), timeout_s=300, env=env
        )
        if got.exit_code != 0:
            return redact(f"worker could not fetch `{base}`: {got.stderr_tail.strip()[-300:]}")
        author = commit_identity(None, settings)  # no client here: the setting, else the bot
        merged = merge_from(checkout, Path(scratch), base, identity(author))
    if merged.clean:
        return f"worker merged the latest `{base}` into the branch; it merged cleanly."
    if not merged.conflicts:  # not a conflict (unrelated histories, a dirty tree)
        return redact(f"worker could not merge `{base}` into the branch: {merged.said}")
    files = ", ".join(merged.conflicts[:20])
    return (
        f"worker merged the latest `{base}` into the branch; these files conflict and hold "
        f"conflict markers for you to resolve: {files}."
    )


def open_pull_request(
    client: GitHubClient,
    settings: GitHubSettings,
    task: Task,
    branch: str,
    result: TaskResult | None = None,
    workspace: Path | None = None,
) -> dict[str, Any]:
    """The open pull request for `branch` (found, else created), linking the issue; its body
    from the agent's summary (`authorship.pull_request_body`)."""
    repo, number = task.ref["repo"], task.ref["number"]
    owner = repo.split("/", 1)[0]

    def existing() -> dict[str, Any] | None:
        pulls = client.request(
            "GET", f"/repos/{repo}/pulls", params={"head": f"{owner}:{branch}", "state": "open"}
        ).data
        return pulls[0] if pulls else None

    found = existing()
    if found is None:
        base = settings.pr_base or client.request("GET", f"/repos/{repo}").data["default_branch"]
        changed = changed_files(workspace, settings.remote, base, branch) if workspace else ""
        body = pull_request_body(number, task.id, result, changed)
        try:
            found = create_once(
                client,
                (
                    "POST",
                    f"/repos/{repo}/pulls",
                    {
                        "title": redact(f"{task.title} (#{number})")[:250],
                        "head": branch,
                        "base": base,
                        "body": body,
                    },
                ),
                existing,
            )
        except GitHubError as exc:
            if exc.status != 422:
                raise
            found = existing()  # "A pull request already exists", or nothing to merge
            if found is None:
                raise
    if not isinstance(found, dict) or not str(found.get("number", "")).isdigit():
        raise GitHubError(f"the pull request for {branch} has no number")
    return found


def remove_label(client: GitHubClient, repo: str, number: int, label: str) -> None:
    """Remove `label` from the issue; a label that is not there is fine."""
    try:
        client.request("DELETE", f"/repos/{repo}/issues/{number}/labels/{quote(label, safe='')}")
    except GitHubError as exc:
        if exc.status != 404:  # not there: nothing to remove
            raise


def git_host(settings: GitHubSettings) -> str:
    """The host a push may authenticate to, as git's credential protocol names it: github.com
    for the public API, else the Enterprise host of `base_url` (`https://HOST/api/v3`), with
    its port when it has one other than https's 443 (git asks for `HOST:PORT` then)."""
    parts = urlsplit(settings.base_url)
    host = parts.hostname or ""
    if host == "api.github.com":
        return "github.com"
    return f"{host}:{parts.port}" if parts.port not in (None, 443) else host
