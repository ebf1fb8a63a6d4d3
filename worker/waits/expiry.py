"""Expiry: a wait past its expiry ends with the outcome `expired`, reported to its source.

Common to Temporal, Step Functions and GitHub environments: a hard expiry with an explicit
outcome. The file is moved to `<wait_states>/expired/` with its
reason, so nothing is lost; when the report fails it stays in place and is retried next run.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

from worker.config import Settings
from worker.kernel.model import TaskEnd
from worker.models import Outcome, Task
from worker.results import TaskResult
from worker.sandbox.cli_home import remove as remove_cli_folder
from worker.sources.base import TaskSource
from worker.state.fsutil import quarantine
from worker.state.store import Store
from worker.state.task_totals import Totals, task_totals
from worker.waits import record
from worker.waits.ledger import Ledger, WaitCode
from worker.waits.state import WaitState, task_of

log = logging.getLogger(__name__)


def end_wait(
    settings: Settings,
    store: Store | None,
    path: Path,
    state: WaitState,
    outcome: Outcome,
    reason: str,
    code: WaitCode,
    sources: dict[str, TaskSource] | None = None,
) -> TaskEnd | None:
    """Report `outcome` to the task's source and move the file aside; None if the report
    failed (the file stays, to be retried), else the task's end as the run records it."""
    task = task_of(state, settings.inbox)
    if sources is None:
        from worker.sources.registry import build_sources

        sources = {s.name: s for s in build_sources(settings, store)}
    result = _ended_result(store, task, state, outcome, reason, code)
    reason = result.reason
    ledger = Ledger(store) if store is not None else None
    source = sources.get(task.source)
    if source is not None:
        try:
            source.report(task, result)
        except Exception as exc:  # keep the file: the next run reports again (idempotent)
            log.warning("waits: could not report %s of %s: %s", outcome.value, task.id, exc)
            if ledger is not None:
                ledger.log(task.id, WaitCode.WAIT_EXPIRY_REPORT_FAILED, str(exc), once=True)
            return None
    quarantine(path, settings.wait_states / outcome.value, f"{code}: {reason}")
    record.forget(settings, path, store)
    remove_cli_folder(settings.state, task.id)  # ended for good: no session to resume
    if store is not None:
        store.release_claim(task.id, outcome.value)
    if ledger is not None:
        ledger.log(task.id, code, reason)
    # An expiry is news; a pull request's end is the run's own outcome (`worker run` says it).
    level = logging.INFO if code is WaitCode.PR_ENDED else logging.WARNING
    log.log(level, "waits: %s %s: %s", task.id, outcome.value, reason)
    return TaskEnd(task.id, task.source, outcome.value, reason, result.branch)


def _ended_result(
    store: Store | None,
    task: Task,
    state: WaitState,
    outcome: Outcome,
    reason: str,
    code: WaitCode,
) -> TaskResult:
    """The result a waiting task ends with, with its totals over all its runs (the report of
    a merged pull request says what the whole task took, not this moment's zero)."""
    totals = task_totals(store, task.id) if store is not None else Totals()
    result = TaskResult(
        task,
        outcome,
        f"{reason}; in all {totals.words()}" if totals.runs else reason,
        [str(code)],
        modes=list(state.modes_used),
        duration_s=totals.duration_s,
        cost_usd=max(state.cost_usd, totals.cost_usd),
        session_id=state.session_id,
        branch=totals.branch,
        iterations_total=totals.iterations,
    )
    pr = state.source_ref.get("pr")
    if pr is not None:
        result.pull_request = {"number": pr, "url": str(state.source_ref.get("prUrl") or "")}
    return result


def expire(
    settings: Settings, store: Store | None, found: list[tuple[Path, WaitState]], now: datetime
) -> list[str]:
    """End every wait in `found` as expired; return the task ids reported."""
    if not found:
        return []
    from worker.sources.registry import build_sources

    sources = {s.name: s for s in build_sources(settings, store)}
    done = []
    for path, state in found:
        at = state.expiry(settings.waits.expiry_days)
        reason = (
            f"waited since {state.since.isoformat()} for "
            f"{state.wait_for or state.resume_when}; expired at {at.isoformat()}"
        )
        if end_wait(
            settings, store, path, state, Outcome.EXPIRED, reason, WaitCode.WAIT_EXPIRED, sources
        ):
            done.append(state.task_id)
    return done
