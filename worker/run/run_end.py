"""The end of a run in its report and its record: the task's result, or what phase 0 saw end
(a merged pull request) when no task was taken, each other ending with a record of its own."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from worker.config import Settings
from worker.kernel.model import TaskEnd
from worker.kernel.scheduling import Decision, Reason
from worker.models import Outcome
from worker.state.run_report import RunReport
from worker.state.store import Store

if TYPE_CHECKING:
    from worker.results import TaskResult


def finish_task(
    store: Store,
    run_id: int,
    t0: float,
    report: RunReport,
    decision: Decision,
    result: TaskResult,
) -> None:
    """The task's result into the run's report and its record."""
    assert decision.task is not None
    report.task_id, report.source = decision.task.id, decision.source
    report.outcome, report.reason = result.outcome, result.reason
    report.modes, report.iterations = result.modes, len(result.iterations)
    report.reason_codes += [c for c in result.reason_codes if c not in report.reason_codes]
    report.cost_usd, report.branch = result.cost_usd, result.branch
    report.wait_state = str(result.wait_state) if result.wait_state else None
    report.infra = result.infra.kind.value if result.infra else None
    report.duration_s = time.monotonic() - t0 - result.review_s  # reviewers are apart
    report.review_s, report.review_cost_usd = result.review_s, result.review_cost_usd
    ended: dict[str, Any] = {"task_id": decision.task.id, "source": decision.source}
    ended |= {"duration_s": report.duration_s, "reason_codes": report.reason_codes}
    store.finish_run(run_id, **(result.record() | ended))


def finish_idle(
    settings: Settings,
    store: Store,
    run_id: int,
    t0: float,
    report: RunReport,
    ended: list[TaskEnd],
) -> None:
    """The record of a run that took no task: idle, or what it saw end (a merge)."""
    if ended:  # the run's outcome is what it saw end, not `idle`
        _as_ended(report, ended.pop(0))
    _close(store, run_id, report, time.monotonic() - t0)
    record_ends(settings, store, ended)


def _close(store: Store, run_id: int, report: RunReport, duration_s: float) -> None:
    store.finish_run(
        run_id,
        task_id=report.task_id,
        source=report.source,
        outcome=report.outcome.value,
        reason=report.reason or None,  # an idle run's: none, as before
        reason_codes=report.reason_codes,
        branch=report.branch,
        duration_s=duration_s,
    )


def _as_ended(report: RunReport, end: TaskEnd) -> None:
    report.task_id, report.source, report.branch = end.task_id, end.source, end.branch
    report.outcome, report.reason = Outcome(end.outcome), end.reason
    if Reason.PR_ENDED not in report.reason_codes:
        report.reason_codes.append(Reason.PR_ENDED)


def record_ends(settings: Settings, store: Store, ended: list[TaskEnd]) -> None:
    """Each other task phase 0 ended gets a record of its own (`log`, `show TASK`)."""
    for end in ended:
        record = RunReport(Outcome.IDLE)
        _as_ended(record, end)
        _close(store, store.start_run(settings.machine_id, os.getpid()), record, 0.0)
