"""A pull request's moments, told as they happen: opened, ready for review, checks failed past
the follow-up limit, merged, closed. Each says the pull request's link and the reason, and is
told once (its key in the outbox: per pull request, or per head commit for the moments a new
push can bring again).

The pull request's code calls these at each moment (`events.after_task` for the opening,
`waits.github_pr` for the rest). They never raise into the caller, and send nothing without
a store (a dry run) or a channel. They sit low in the layers (with the outbox and the
channels) so that the waits may call them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from worker.config import Settings
from worker.operator.notify import outbox
from worker.state.store import Store

if TYPE_CHECKING:
    from worker.results import TaskResult
    from worker.waits.github_pr import Pull

log = logging.getLogger(__name__)

HEADS = {
    "pr_opened": "pull request #{n} opened",
    "pr_ready": "pull request #{n} is ready for review",
    "pr_checks_failed": "pull request #{n}: checks failed past the follow-up limit",
    "pr_merged": "pull request #{n} merged",
    "pr_closed": "pull request #{n} closed unmerged",
}


def tell(
    settings: Settings,
    store: Store | None,
    moment: str,
    *,
    task_id: str,
    title: str,
    pull: dict[str, Any],
    reason: str,
    once_per: str = "",
) -> bool:
    """Queue and send one moment of pull request `pull` ({repo, number, url}); True when it
    was queued now (False: a repeat, unwanted, no channel, or a dry run)."""
    if store is None or not outbox.channels(settings):
        return False
    number, repo = pull.get("number"), pull.get("repo") or ""
    try:
        key = f"{moment}:{repo}#{number}:{once_per}"
        head = HEADS[moment].format(n=number)
        name = f"{task_id} ({title[:80]})" if title else task_id
        text = "\n".join(line for line in (reason, pull.get("url"), f"task {name}") if line)
        added = outbox.enqueue(settings, store, moment, key, f"worker: {head}", text, task_id)
        if added:
            outbox.flush(settings, store)
        return bool(added)
    except Exception:
        log.warning("notify: %s of %s not told (the task is not affected)", moment, task_id)
        return False


def opened(settings: Settings, store: Store, result: TaskResult) -> bool:
    """The task opened (or updated) its pull request: told once per pull request."""
    pull, repo = result.pull_request, result.task.ref.get("repo")
    if not pull or not repo:
        return False
    about = {"repo": repo, "number": pull.get("number"), "url": pull.get("url")}
    task = result.task
    return tell(
        settings,
        store,
        "pr_opened",
        task_id=task.id,
        title=task.title,
        pull=about,
        reason=result.reason,
    )


def ended(pull: Pull, end: tuple[str, str] | None) -> bool:
    """The pull request a wait follows ended: merged (`success`) or closed (`cancelled`)."""
    if end is None:
        return False
    moment = "pr_merged" if end[0] == "success" else "pr_closed"
    return _tell_of(pull, moment, end[1], "")


def looked(pull: Pull, failed: list[str], *, ready: bool) -> bool:
    """A wait's look at its open pull request: ready for review (every check passed, nothing
    asked), or checks failed once the follow-up rounds are used up (a person decides)."""
    head = str((pull.data.get("head") or {}).get("sha") or "")
    if ready:
        why = "its checks passed and nothing is asked of it: a person reviews and merges it"
        return _tell_of(pull, "pr_ready", why, head)
    state, settings = pull.wait.state, pull.ctx.settings
    rounds = int(state.source_ref.get("prRounds") or 0)
    limit = settings.github.max_follow_ups
    if not failed or rounds < limit:
        return False  # the agent fixes them itself: nobody needs telling
    names = ", ".join(line.split("\n", 1)[0].lstrip("# ") for line in failed[:5])
    why = (
        f"{names}; the agent has had {rounds} round(s) of fixes ([github] max_follow_ups"
        f" = {limit}): a person decides (/approve {state.task_id} for more rounds, or fix"
        " it by hand)"
    )
    return _tell_of(pull, "pr_checks_failed", why, head)


def _tell_of(pull: Pull, moment: str, reason: str, once_per: str) -> bool:
    state = pull.wait.state
    return tell(
        pull.ctx.settings,
        pull.ctx.lookups.store,
        moment,
        task_id=state.task_id,
        title=state.task_title,
        pull={"repo": pull.repo, "number": pull.number, "url": pull.data.get("html_url")},
        reason=reason,
        once_per=once_per,
    )
