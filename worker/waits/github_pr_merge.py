"""Worker's merge of a pull request: when the merge label asks it, put there by a trusted
person, with every required check passed and a trusted approval on the current head; else
what is missing, said in the verdict.

Read for `pull_request` waits (github_pr.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from worker.waits.conditions import Verdict
from worker.waits.github_pr_checks import Checks

if TYPE_CHECKING:
    from worker.waits.github_pr import Pull


def merge_if_asked(
    pull: Pull, checks: Checks, reviews: list[dict[str, Any]], verdict: Verdict
) -> bool:
    """Merge when the merge label asks it and everything it needs is there: True when merged;
    else what is missing goes to `verdict.ignored`."""
    gh = pull.ctx.settings.github
    labels = {str(label.get("name")) for label in pull.data.get("labels") or []}
    if gh.merge_label not in labels:
        return False
    missing = _merge_missing(pull, checks, reviews)
    if missing:
        verdict.ignored.append(("PR_MERGE_BLOCKED", f"#{pull.number}: " + "; ".join(missing)))
        return False
    body = {"merge_method": gh.merge_method, "sha": pull.head}
    pull.client.request("PUT", f"/repos/{pull.repo}/pulls/{pull.number}/merge", body=body)
    return True


def _merge_missing(pull: Pull, checks: Checks, reviews: list[dict[str, Any]]) -> list[str]:
    label = pull.ctx.settings.github.merge_label
    missing = []
    if not pull.trusted(_labelled_by(pull, label)):
        missing.append(f"the label {label!r} was not put there by a trusted person")
    required = _required_checks(pull)
    if required is None:  # not readable: every check and status on the head must pass
        if checks.pending:
            missing.append("checks still running: " + ", ".join(checks.pending[:5]))
        if checks.failed:
            missing.append(f"{len(checks.failed)} check(s) failed")
    elif required - checks.passed:
        missing.append("required checks not passed: " + ", ".join(sorted(required - checks.passed)))
    if not _approved(pull, reviews):
        missing.append("no approval by a trusted reviewer on the current head")
    if pull.data.get("mergeable") is False:
        missing.append("the pull request conflicts with its base")
    return missing


def _approved(pull: Pull, reviews: list[dict[str, Any]]) -> bool:
    """A trusted reviewer's latest review approves the current head commit."""
    latest: dict[str, dict[str, Any]] = {}
    for review in reviews:
        if review.get("state") in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
            latest[(review.get("user") or {}).get("login", "")] = review
    return any(
        review.get("state") == "APPROVED"
        and review.get("commit_id") == pull.head
        and pull.trusted(login)
        for login, review in latest.items()
    )


def _labelled_by(pull: Pull, label: str) -> str:
    """Who last put `label` on the pull request (its issue events)."""
    who = ""
    for event in pull.client.paginate(f"/repos/{pull.repo}/issues/{pull.number}/events"):
        if event.get("event") == "labeled" and (event.get("label") or {}).get("name") == label:
            who = (event.get("actor") or {}).get("login", "")
    return who


def _required_checks(pull: Pull) -> set[str] | None:
    """The base branch's required checks, or None where the token may not read them (then
    every check and status on the head commit must have passed)."""
    from worker.sources.github.client import GitHubError

    path = f"/repos/{pull.repo}/branches/{pull.base}/protection/required_status_checks"
    try:
        found = pull.client.request("GET", path, retry=False).data or {}
    except GitHubError as exc:
        if exc.status in (403, 404):
            return None
        raise
    names = {str(c) for c in found.get("contexts") or []}
    names |= {str(c.get("context")) for c in found.get("checks") or [] if isinstance(c, dict)}
    return names
