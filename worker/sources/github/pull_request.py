"""A task's pull request: opened (or found) for its branch, then followed: the task waits on it
for its checks, its reviews and its merge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worker.models import Outcome, Task, TaskResult
from worker.process.proc import redact
from worker.sources.github.authorship import changed_files, pull_request_body
from worker.sources.github.claims import create_once
from worker.sources.github.client import GitHubClient, GitHubError
from worker.sources.github.settings import GitHubSettings, held_reason, next_round

# A task its pull request ended (merged, closed; `worker.waits.ledger.WaitCode.PR_ENDED`):
# nothing to deliver, its branch to delete.
ENDED = "PR_ENDED"


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
