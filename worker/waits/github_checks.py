"""`user_approval` by GitHub comment and `github_decision`, batched per repository.

A repository is looked at only when one of its waits is due (recheck interval); an issue is
read further only when its `updated_at` moved since the last look at that wait.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import NamedTuple

from worker.sources.github.selection import parse_task_id
from worker.waits.conditions import CheckContext, Verdict, Waiting, clip, decision_text
from worker.waits.github_look import GitHubLook, whole

log = logging.getLogger(__name__)

# `updated_at` has whole seconds and clocks drift: an issue updated this close before our last
# look may have changed again after it, unseen; it is looked at once more.
SKEW_S = 60.0

Reader = Callable[[CheckContext, GitHubLook, Waiting, str, int], Verdict]


def issue_of(wait: Waiting) -> tuple[str, int] | None:
    ref = wait.state.source_ref
    repo, number = ref.get("repo"), ref.get("number")
    if isinstance(repo, str) and isinstance(number, int | str) and str(number).isdigit():
        return repo, int(number)
    task_id = wait.state.task_id
    return parse_task_id(task_id) if "#" in task_id else None  # `owner/name#12` only


def github_approval(ctx: CheckContext, waits: Sequence[Waiting]) -> list[Verdict]:
    return _batched(ctx, waits, _approval)


def github_decision(ctx: CheckContext, waits: Sequence[Waiting]) -> list[Verdict]:
    return _batched(ctx, waits, _decision)


def _batched(ctx: CheckContext, waits: Sequence[Waiting], read: Reader) -> list[Verdict]:
    out = [Verdict() for _ in waits]
    look = ctx.github
    if look is None:
        return out
    by_repo: dict[str, list[int]] = {}
    for index, wait in enumerate(waits):
        issue = issue_of(wait)
        if issue is not None and wait.due:
            by_repo.setdefault(issue[0], []).append(index)
    for repo, indexes in by_repo.items():
        try:
            updated = look.updated(repo, min(waits[i].since for i in indexes))
        except Exception as exc:  # GitHub down: the waits keep waiting, the run goes on
            log.warning("waits: cannot look at %s: %s", repo, exc)
            for i in indexes:
                out[i].ignored.append(("WAIT_CHECK_FAILED", f"{repo}: {exc}"[:200]))
            continue
        for i in indexes:
            wait = waits[i]
            out[i].looked_remote = True  # covered by this look: the recheck clock restarts
            _, number = issue_of(wait) or (repo, 0)
            changed = updated.get(number)
            if changed is None or changed < whole(wait.since):
                continue  # not changed since the wait began
            stamp = changed.isoformat()
            if stamp == wait.seen and changed.timestamp() < wait.checked_at - SKEW_S:
                continue  # not changed since the last look at this wait
            try:
                verdict = read(ctx, look, wait, repo, number)
            except Exception as exc:
                log.warning("waits: cannot read %s#%s: %s", repo, number, exc)
                out[i].ignored.append(("WAIT_CHECK_FAILED", f"{repo}#{number}: {exc}"[:200]))
                continue
            verdict.looked_remote, verdict.seen = True, stamp
            out[i] = verdict
    return out


def may_answer(ctx: CheckContext, look: GitHubLook, wait: Waiting, repo: str, login: str) -> bool:
    listed = (
        wait.state.approvers or ctx.settings.waits.approvers or ctx.settings.github.trusted_users
    )
    if listed:
        return login in listed
    return look.may_approve(repo, login)


def _approval(
    ctx: CheckContext, look: GitHubLook, wait: Waiting, repo: str, number: int
) -> Verdict:
    verdict = Verdict()
    found = first_answer(ctx, look, wait, repo, number, verdict)
    if found is not None:
        where = f"a comment on {repo}#{number}"
        verdict.answer = decision_text(found.approved, found.who, where, found.note)
    return verdict


class Answer(NamedTuple):
    """A person's `/approve` or `/reject` comment, read as an answer to a wait."""

    approved: bool
    who: str
    note: str  # the words after `/approve` or `/reject`
    at: datetime


def first_answer(
    ctx: CheckContext, look: GitHubLook, wait: Waiting, repo: str, number: int, verdict: Verdict
) -> Answer | None:
    """The first `/approve` or `/reject` comment on issue (or pull request) `number` since the
    wait began, by someone who may answer it. The others go to `verdict.ignored` with their
    reason."""
    for comment in sorted(look.comments(repo, number, wait.since), key=lambda c: c.created_at):
        if comment.created_at < whole(wait.since):
            continue
        word = (comment.body.strip().split(maxsplit=1) or [""])[0].lower()
        if word not in ("/approve", "/reject"):
            continue
        if comment.edited:  # maybe not by its author: a new comment approves
            verdict.ignored.append(
                ("APPROVAL_EDITED", f"{word} by {comment.author} on {repo}#{number}, edited")
            )
            continue
        if not may_answer(ctx, look, wait, repo, comment.author):
            verdict.ignored.append(
                ("APPROVER_NOT_ALLOWED", f"{word} by {comment.author} on {repo}#{number}")
            )
            continue
        note = comment.body.strip()[len(word) :].strip()
        return Answer(word == "/approve", comment.author, note, comment.created_at)
    return None


def _decision(
    ctx: CheckContext, look: GitHubLook, wait: Waiting, repo: str, number: int
) -> Verdict:
    verdict = Verdict()
    for event in sorted(look.events(repo, number, wait.since), key=lambda e: e.created_at):
        if event.event == "labeled" and not event.detail.lower().startswith("decision:"):
            continue
        if event.event != "merged" and not may_answer(ctx, look, wait, repo, event.actor):
            verdict.ignored.append(
                ("APPROVER_NOT_ALLOWED", f"{event.event} by {event.actor} on {repo}#{number}")
            )
            continue
        what = {
            "closed": "the issue was closed",
            "reopened": "the issue was reopened",
            "labeled": f"the label {event.detail!r} was added",
            "merged": f"the linked {event.detail} was merged",
        }.get(event.event, event.event)
        via = f" ({event.detail})" if event.event == "closed" and event.detail else ""
        verdict.answer = clip(
            f"Decision on {repo}#{number}: {what}{via} by "
            f"{event.actor or 'someone'} at {event.created_at.isoformat()}."
        )
        break
    return verdict
