"""A pull request's head commit as GitHub checks it: its check runs and commit statuses, read
once per look (running, failed with an excerpt of their output, passed).

Read for `pull_request` waits (github_pr.py), which say what the result means for the task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from worker.waits.github_pr import Pull

FAILED_RUN = ("failure", "timed_out", "cancelled", "action_required", "startup_failure")
EXCERPT = 1200  # characters of one failing check's output handed to the agent
ANNOTATIONS = 10  # a failing check run's annotations read (one request, first page)


@dataclass
class Checks:
    """The head commit's check runs and commit statuses, once read."""

    pending: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # each: the name and its excerpt
    failed_names: list[str] = field(default_factory=list)
    passed: set[str] = field(default_factory=set)


def read_checks(pull: Pull) -> Checks:
    found = Checks()
    head = pull.head
    if not head:
        return found
    for run in pull.get(f"commits/{head}/check-runs", f"runs@{head}").get("check_runs") or []:
        name = str(run.get("name") or "a check")
        if run.get("status") != "completed":
            found.pending.append(name)
        elif run.get("conclusion") in FAILED_RUN:
            found.failed.append(_run_excerpt(pull, run, name))
            found.failed_names.append(name)
        else:
            found.passed.add(name)
    # No statuses at all reads "pending" with total_count 0: that is "none", not "running".
    for status in pull.get(f"commits/{head}/status", f"status@{head}").get("statuses") or []:
        name, state = str(status.get("context") or "a status"), status.get("state")
        if state == "pending":
            found.pending.append(name)
        elif state in ("failure", "error"):
            said = str(status.get("description") or "")[:EXCERPT]
            link = status.get("target_url") or ""
            found.failed.append(f"### {name} ({state})\n{said}\n{link}".strip())
            found.failed_names.append(name)
        else:
            found.passed.add(name)
    return found


def _run_excerpt(pull: Pull, run: dict[str, Any], name: str) -> str:
    output = run.get("output") or {}
    parts = [str(output.get(k) or "") for k in ("title", "summary", "text")]
    text = "\n".join(p for p in parts if p.strip())
    if output.get("annotations_count") and run.get("id"):
        path = f"/repos/{pull.repo}/check-runs/{run['id']}/annotations"
        notes = pull.client.request("GET", path, params={"per_page": ANNOTATIONS}).data or []
        text += "".join(
            f"\n{a.get('path')}:{a.get('start_line')}: {a.get('message')}"
            for a in notes[:ANNOTATIONS]
            if isinstance(a, dict)
        )
    return f"### {name} ({run.get('conclusion')})\n{text[:EXCERPT] or '(no output)'}"
