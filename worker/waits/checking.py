"""Phase 0's look at the live waits: each asks its condition, in one batched look per kind,
and what changed is remembered in the ledger. Imported only with a wait to look at."""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from worker.config import Settings
from worker.kernel.scheduling import ReadyWait
from worker.state.store import Store
from worker.waits.builtin import registry
from worker.waits.conditions import CheckContext, Verdict, Waiting, trust_of, watched
from worker.waits.ledger import CheckRow, Ledger, WaitCode
from worker.waits.lookups import Lookups
from worker.waits.state import WaitState, task_of

if TYPE_CHECKING:
    from worker.waits.github_look import GitHubLook
    from worker.waits.phase0 import WaitScan

log = logging.getLogger(__name__)


def check(
    settings: Settings,
    store: Store | None,
    live: list[tuple[Path, WaitState]],
    *,
    ledger: Ledger | None,
    rows: dict[str, CheckRow],
    stamps: dict[str, str],
    now: datetime,
    dry_run: bool,
    github: GitHubLook | None,
    result: WaitScan,
) -> GitHubLook | None:
    """Ask the live waits' conditions; add the ready ones to `result.ready` and count the
    others as pending. Returns the GitHub look used (made here for a wait on GitHub)."""
    waits, known = _waitings(settings, live, rows, now)
    lookups = Lookups(settings, dry_run=dry_run, store=None if dry_run else store)
    ctx = CheckContext(settings, now, lookups)
    if github is None and ledger is not None and _needs_github(waits):
        github = _client_look(settings, store)
    ctx.github = github
    verdicts: dict[str, Verdict] = dict(known)
    by_kind: dict[str, list[Waiting]] = {}
    for wait in waits:
        if wait.key not in known:
            by_kind.setdefault(wait.kind, []).append(wait)
    for condition in registry():
        mine = by_kind.get(condition.name)
        if mine:
            for wait, verdict in zip(mine, condition.check(ctx, mine), strict=True):
                verdicts[wait.key] = verdict
    if ledger is not None:
        _remember(ledger, waits, verdicts, rows, stamps, now, settings)
    for wait in waits:
        verdict = verdicts.get(wait.key) or Verdict()
        if verdict.looked_remote and verdict.seen and wait.kind == "pull_request":
            then = "; resuming the task" if verdict.answer else ""
            result.seen.append(f"{wait.state.task_id}: pull request {verdict.seen}{then}")
        if verdict.end is not None and not dry_run:
            _end(settings, store, wait, verdict.end, result)
            continue
        if verdict.answer is None:
            result.pending += 1
            continue
        result.ready.append(
            ReadyWait(
                task_of(wait.state, settings.inbox),
                wait.since.timestamp(),
                verdict.answer,
                wait.path,
            )
        )
    return github


def _end(
    settings: Settings,
    store: Store | None,
    wait: Waiting,
    end: tuple[str, str],
    result: WaitScan,
) -> None:
    """The wait ends without the agent (its pull request merged or closed): reported to the
    task's source, the file set aside; a failed report leaves it to the next run."""
    from worker.models import Outcome
    from worker.waits.expiry import end_wait

    outcome, reason = Outcome(end[0]), end[1]
    ended = end_wait(settings, store, wait.path, wait.state, outcome, reason, WaitCode.PR_ENDED)
    if ended is not None:
        result.ended.append(wait.state.task_id)
        result.ends.append(ended)
    else:
        result.pending += 1


def _waitings(
    settings: Settings,
    live: list[tuple[Path, WaitState]],
    rows: dict[str, CheckRow],
    now: datetime,
) -> tuple[list[Waiting], dict[str, Verdict]]:
    interval, now_s = settings.waits.recheck_interval_s, now.timestamp()
    waits, known = [], {}
    for path, state in live:
        # Its condition is a known one: worker.waits.validate checked it when it was read.
        wait = Waiting(path, state, state.condition)
        row = rows.get(wait.key)
        if row is not None:
            wait.seen, wait.checked_at = row.seen, row.checked_at
            wait.due = now_s - row.checked_at >= interval or (
                wait.kind == "pull_request" and watched(row.seen)
            )
            if row.answer is not None and row.trust != trust_of(state, settings):
                # Found under other allow-lists: the conditions judge the approver again,
                # the remote one with a fresh look.
                wait.seen, wait.due = None, True
            elif row.answer is not None:
                known[wait.key] = Verdict(row.answer, list(row.consume), seen=row.seen)
        waits.append(wait)
    return waits, known


def _client_look(settings: Settings, store: Store | None) -> GitHubLook | None:
    from worker.waits.github_look import ClientLook  # GitHub's parts: only with a wait on it

    try:
        from worker.sources.github.client import make_client

        return ClientLook(make_client(settings.github, store))
    except Exception as exc:  # no client: the GitHub conditions wait, the rest goes on
        log.warning("waits: no GitHub client: %s", exc)
        return None


def _needs_github(waits: list[Waiting]) -> bool:
    # A wait can be on a GitHub issue only with a repository in its source or a `#` in its
    # task id (`issue_of`): GitHub's parts are imported only for those (most runs: none).
    maybe = [
        w
        for w in waits
        if w.due
        and w.kind in ("user_approval", "github_decision", "pull_request")
        and ("repo" in w.state.source_ref or "#" in w.state.task_id)
    ]
    if not maybe:
        return False
    from worker.waits.github_checks import issue_of

    return any(issue_of(w) for w in maybe)


def _remember(
    ledger: Ledger,
    waits: list[Waiting],
    verdicts: dict[str, Verdict],
    rows: dict[str, CheckRow],
    stamps: dict[str, str],
    now: datetime,
    settings: Settings,
) -> None:
    changed = []
    for wait in waits:
        verdict = verdicts.get(wait.key) or Verdict()
        old = rows.get(wait.key)
        if old is not None and _as_before(old, wait, verdict, stamps[wait.key]):
            continue  # not met and not looked at, as at the last run: most waits, most runs
        for code, detail in verdict.ignored:
            log.warning("waits: %s: %s (%s)", wait.state.task_id, code, detail)
            ledger.log(wait.state.task_id, code, detail, once=True)
        row = CheckRow(
            wait.key,
            stamps[wait.key],
            wait.state.task_id,
            now.timestamp() if verdict.looked_remote else (old.checked_at if old else 0.0),
            verdict.answer,
            verdict.consume if verdict.answer is not None else [],
            verdict.seen or wait.seen,
            trust_of(wait.state, settings) if verdict.answer is not None else None,
        )
        if old != row:
            if verdict.answer is not None and (old is None or old.answer is None):
                ledger.log(row.task_id, WaitCode.WAIT_READY, verdict.answer[:200])
            changed.append(row)
    ledger.record(changed)


def _as_before(old: CheckRow, wait: Waiting, verdict: Verdict, stamp: str) -> bool:
    """A verdict of "not met" that looked at nothing remote and ignored nothing, for a wait
    whose row says so already: the row `_remember` would write is `old`, and nothing is
    logged (the cheap test of the usual case before building that row)."""
    return (
        verdict.answer is None
        and not verdict.looked_remote
        and not verdict.ignored
        and old.answer is None
        and not old.consume
        and old.stamp == stamp
        and old.seen == (verdict.seen or wait.seen)
        and old.task_id == wait.state.task_id
    )
