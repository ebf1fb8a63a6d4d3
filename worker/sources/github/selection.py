"""Which GitHub issues are tasks, in which order: pure functions over the REST API's JSON.

An issue is a candidate when it is open, unlocked, not a pull request, carries the configured
label, names this worker in its `Agent:` field, and carries no end-state label. Priority comes
from labels (`P0`..`P9` or `priority:<digit|word>`, 0 most urgent, 5 without one), then age.
The body is only searched for the `Agent:` routing field; the rest of it is task text (data).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from worker.models import Task
from worker.sources.github.settings import GitHubSettings

SOURCE = "github"
# Finished and waiting issues keep the trigger label and stay open: up to this many of them
# are read past in a listing, besides the `max_issues` that may be work.
FINISHED_READ = 1000
# Compiled at their first use (`re`'s own cache): runs without GitHub never read them.
_AGENT = r"(?im)^[\s>*_-]*agent[*_]*\s*:[*_\s]*(?P<value>[^\n]*?)[*_\s]*$"
_TASK_ID = r"^(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)#(?P<number>[1-9][0-9]{0,9})$"
_P_LABEL = r"(?i)^p([0-9])$"
_PRIORITY_LABEL = r"(?i)^priority\s*[:/-]\s*(.+)$"
_PRIORITY_WORDS = {
    "critical": 0,
    "urgent": 0,
    "highest": 1,
    "high": 2,
    "medium": 5,
    "normal": 5,
    "low": 8,
    "lowest": 9,
}
DEFAULT_PRIORITY = 5


@dataclass(frozen=True)
class Screened:
    """The verdict on one issue: a reason code when it is passed over, None when it is a task."""

    reason_code: str | None
    detail: str = ""


def task_id(repo: str, number: int) -> str:
    return f"{repo}#{number}"


def parse_task_id(value: str) -> tuple[str, int] | None:
    """`owner/name#123` -> ("owner/name", 123); None for anything else."""
    match = re.match(_TASK_ID, value.strip())
    return (match["repo"], int(match["number"])) if match else None


def label_names(issue: dict[str, Any]) -> list[str]:
    return [
        str(label.get("name", "")) for label in issue.get("labels") or [] if isinstance(label, dict)
    ]


def assignee_logins(issue: dict[str, Any]) -> list[str]:
    return [str(a.get("login", "")) for a in issue.get("assignees") or [] if isinstance(a, dict)]


def agent_field(body: str | None) -> str | None:
    """The value of the first `Agent:` line of the body, or None when there is none."""
    match = re.search(_AGENT, body or "")
    return match["value"].strip() if match else None


def agent_matches(body: str | None, settings: GitHubSettings) -> Screened:
    value = agent_field(body)
    if value is None:
        if settings.require_agent_field:
            return Screened("AGENT_FIELD_MISSING", "no `Agent:` line in the issue body")
        return Screened(None)
    wanted = {name.strip().lower() for name in re.split(r"[|,/]", value) if name.strip()}
    mine = {name.strip().lower() for name in settings.agent_identity}
    if wanted & mine:
        return Screened(None)
    return Screened("NOT_FOR_THIS_AGENT", f"Agent: {value[:60]}")


def priority_of(labels: list[str]) -> int:
    """The most urgent priority named by the labels; DEFAULT_PRIORITY without one."""
    found = []
    for name in labels:
        match = re.match(_P_LABEL, name.strip())
        if match:
            found.append(int(match[1]))
            continue
        match = re.match(_PRIORITY_LABEL, name.strip())
        if match:
            word = match[1].strip().lower()
            if word.isdigit():
                found.append(min(9, int(word)))
            elif word.startswith("p") and word[1:].isdigit():
                found.append(min(9, int(word[1:])))
            elif word in _PRIORITY_WORDS:
                found.append(_PRIORITY_WORDS[word])
    return min(found, default=DEFAULT_PRIORITY)


def up_to_max(issues: Iterable[dict[str, Any]], settings: GitHubSettings) -> list[dict[str, Any]]:
    """The listing's issues until `max_issues` of them may be work: one with an end-state
    label (done, failed, cancelled, waiting) is read past, not counted, so finished issues
    (oldest first) never hide new work."""
    ends = set(settings.end_labels)
    out, counted = [], 0
    for issue in issues:
        out.append(issue)
        counted += ends.isdisjoint(label_names(issue))
        if counted >= settings.max_issues:
            break
    return out


def screen(issue: dict[str, Any], settings: GitHubSettings, login: str | None) -> Screened:
    """Everything but trust and the claims' liveness, which need more requests."""
    labels = label_names(issue)
    if "pull_request" in issue:
        return Screened("NOT_AN_ISSUE", "a pull request")
    if issue.get("state") != "open":
        return Screened("ISSUE_CLOSED")
    if issue.get("locked"):
        return Screened("ISSUE_LOCKED")
    if settings.label not in labels:
        return Screened("LABEL_MISSING", settings.label)
    if {settings.done_label, settings.failed_label, settings.cancelled_label} & set(labels):
        return Screened("ALREADY_DONE", "remove the end-state label to run it again")
    if settings.waiting_label in labels:
        return Screened("WAITING", "resumed by its wait state")
    assignees = assignee_logins(issue)
    # An assignment next to our claim label was made by a worker: the claim decides then.
    if assignees and settings.in_progress_label not in labels and login not in assignees:
        return Screened("ASSIGNED_TO_OTHER", ", ".join(assignees)[:100])
    return agent_matches(issue.get("body"), settings)


def timestamp(value: str | None) -> float:
    """Epoch seconds of an API timestamp (`2026-01-02T03:04:05Z`); 0 when missing."""
    if not value:
        return 0.0
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def issue_task(repo: str, issue: dict[str, Any]) -> Task:
    """The Task of an issue. `ref` holds JSON values only: it is persisted in wait states."""
    number = int(issue["number"])
    labels = label_names(issue)
    created = timestamp(issue.get("created_at"))
    return Task(
        id=task_id(repo, number),
        source=SOURCE,
        title=str(issue.get("title") or "")[:300],
        body=str(issue.get("body") or ""),
        sender=(issue.get("user") or {}).get("login"),
        priority=priority_of(labels),
        created_at=datetime.fromtimestamp(created, UTC) if created else None,
        labels=tuple(labels),
        ref={
            "repo": repo,
            "number": number,
            "url": issue.get("html_url"),
            "updated_at": issue.get("updated_at"),
        },
    )


def order(tasks: list[Task]) -> list[Task]:
    """Most urgent first, then oldest, then lowest number (stable across runs)."""
    return sorted(
        tasks,
        key=lambda t: (
            t.priority,
            t.created_at.timestamp() if t.created_at else float("inf"),
            t.ref.get("number", 0),
            t.id,
        ),
    )
