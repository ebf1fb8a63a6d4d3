"""What each waiting task waits for, told apart on the dashboard: a person (an approval, a
decision on GitHub, a message), CI (its pull request's checks running), a review (its pull
request open with nothing to fix, or a change asked), or a moment (a timed wait, a usage
limit's reset). A task that runs now is not waiting, whatever file its wait left."""

from __future__ import annotations

from typing import Any

from worker.humanize import CONDITION_WORDS

# The groups in the order the page shows them, each with its heading.
GROUPS = (
    ("person", "Waiting for a person"),
    ("ci", "Waiting for CI"),
    ("review", "Waiting for a review"),
    ("time", "Waiting for a moment"),
)


def group_of(wait: dict[str, Any]) -> str:
    """`person`, `ci`, `review` or `time` for one row of `worker waits list`."""
    kind = str(wait.get("resume_when") or "").split(":", 1)[0].strip().lower()
    if kind == "time":
        return "time"
    if kind == "pull_request":
        # Where the pull request stood at the last look (`waits.github_pr._standing`); not
        # looked at yet: its checks are what comes first.
        standing = str(wait.get("pull_request") or "")
        return "ci" if not standing or "checks running" in standing else "review"
    return "person"


def grouped(waits: list[dict[str, Any]], running: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The waits by group, in `GROUPS` order, each wait with its words (`what`), whether a
    person may approve it here, and whether it is answered already (`ready`: the next run
    resumes it); a wait whose task runs now is left out."""
    busy = {run["task_id"] for run in running if run.get("task_id")}
    found: dict[str, list[dict[str, Any]]] = {key: [] for key, _ in GROUPS}
    for wait in waits:
        if wait["task_id"] in busy:
            continue
        kind = wait["resume_when"].split(":", 1)[0].strip().lower()
        found[group_of(wait)].append(
            {
                **wait,
                "what": CONDITION_WORDS.get(wait["resume_when"], wait["resume_when"]),
                # only a wait for a user's approval is approved or rejected (`worker waits`)
                "approvable": kind == "user_approval",
            }
        )
    return [
        {"key": key, "heading": heading, "waits": found[key]}
        for key, heading in GROUPS
        if found[key]
    ]
