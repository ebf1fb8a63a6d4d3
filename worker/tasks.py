"""Executing one chosen task: set up, loop, report, release, clean up."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from worker.config import Settings
from worker.guard import WorkspaceGuard
from worker.infra import ANSWER_KEY, HITS_KEY
from worker.kernel.watcher import StopWatcher
from worker.loop import LoopContext, StartPoint, run_task
from worker.models import Outcome, Task, TaskResult
from worker.modes import ModeSet
from worker.notify.events import after_task as notify_after_task
from worker.orphans import start_time
from worker.progress import Tracker, review_step
from worker.review.hooks import after_task, prompt_sections
from worker.run_report import RunOptions
from worker.scheduling import Decision
from worker.sources.base import TaskSource
from worker.sources.fallback import failure_report, run_checks
from worker.store import Store
from worker.supervision.factory import make_supervisor
from worker.waits import record
from worker.workspace_git import create_worktree, finish_worktree

log = logging.getLogger(__name__)


def execute(
    settings: Settings,
    options: RunOptions,
    modes: ModeSet,
    store: Store,
    run_id: int,
    decision: Decision,
    mode_id: str,
    sources: dict[str, TaskSource],
    stop: threading.Event,
) -> TaskResult:
    task = decision.task
    assert task is not None
    source = sources.get(task.source)
    start = StartPoint(mode=mode_id)
    wait_path: Path | None = None
    if decision.wait is not None:
        wait_path = decision.wait.ref
        start = _restore(settings, wait_path, mode_id, decision.wait.answer)
    cwd, branch = settings.workspace, None
    if options.use_worktree:
        cwd, branch = create_worktree(settings.workspace, settings.state / "worktrees", task.id)
    ctx = LoopContext(
        settings=settings,
        modes=modes,
        store=store,
        run_id=run_id,
        cwd=cwd,
        supervisor=make_supervisor(settings, task, run_id),
        forced_model=options.model,
        stop_event=stop,
        sections=_sections(settings, store, task),
        renew=(lambda: source.renew(task)) if source is not None else (lambda: None),
        on_agent_start=lambda pid: store.note_agent(task.id, pid, start_time(pid)),
    )
    ctx.progress = Tracker(store, run_id, task, options.progress)  # heartbeat for `status`
    watcher = StopWatcher(settings, task, stop)  # obeys stop/pause orders while it runs
    guard = WorkspaceGuard(settings)
    result: TaskResult | None = None
    try:
        with watcher:
            result = _run(ctx, task, start)
    except BaseException:
        # Keep the claim and any wait state: the lease brings the task back if we die here.
        log.exception("task %s crashed", task.id)
        raise
    finally:
        if branch is not None:
            # The agent's work is committed on the task branch whatever the outcome.
            done = result is not None and result.outcome is Outcome.SUCCESS
            state = "done" if done else "work in progress"
            message = f"worker: {task.id} ({state}): {task.title[:60]}"
            finish_worktree(settings.workspace, cwd, message)
        restored = guard.check(store, settings.logs / f"run-{run_id}")
    result.reason_codes += restored
    result = watcher.settle(result, mode_id)
    result.branch = branch
    store.record_result(  # before the source hears of it: a kill from here on loses nothing
        run_id,
        task_id=task.id,
        source=task.source,
        outcome=result.outcome.value,
        reason=result.reason[:1000],
        modes=result.modes,
        iterations=len(result.iterations),
        cost_usd=result.cost_usd,
        branch=branch,
        reason_codes=result.reason_codes,
    )
    _report(settings, store, task, result, source, wait_path)
    notify_after_task(settings, store, result, run_id)  # queued, sent, never raises
    with review_step(store, options.progress) as review:
        try:
            after_task(settings, store, result)
        except Exception as exc:  # reviewers never stop the task queue
            log.warning("reviewers failed after %s: %s", task.id, exc)
    if review.ran:
        result.review_s, result.review_cost_usd = review.duration_s, review.cost_usd
    return result


def _run(ctx: LoopContext, task: Task, start: StartPoint) -> TaskResult:
    commands = list(task.ref.get("commands", [])) if task.source == "fallback" else []
    if commands and start.resume_answer is None:
        checks = run_checks(
            commands,
            ctx.cwd,
            ctx.settings.fallback.command_timeout_s,
            ctx.settings.logs / f"run-{ctx.run_id}",
        )
        failing = [check for check in checks if not check.ok]
        if not failing:
            return TaskResult(
                task,
                Outcome.SUCCESS,
                "build and tests pass; no agent needed",
                ["FALLBACK_CHECKS_PASSED"],
                modes=[],
            )
        ctx.checks = [check.command for check in failing]
        ctx.checks_report = failure_report(failing)
    return run_task(ctx, task, start)


def _sections(settings: Settings, store: Store, task: Task) -> list[str]:
    try:
        return list(prompt_sections(settings, store, task))
    except Exception as exc:  # knowledge is a help, never a blocker
        log.warning("could not build the knowledge sections: %s", exc)
        return []


def _restore(settings: Settings, path: Path, mode_id: str, answer: str) -> StartPoint:
    state = record.recorded_state(settings, path)
    extra = state.model_extra or {}
    # Resumed in another mode (`--mode`, or its own is gone): that mode's model, from 1.
    same_mode = state.context.mode == mode_id
    return StartPoint(
        mode=mode_id,
        iteration=max(1, state.context.iteration) if same_mode else 1,
        session_id=state.session_id,
        resume_answer=answer,
        modes_used=list(state.modes_used),
        cost_so_far=state.cost_usd,
        usage_limit_hits=int(extra.get("usageLimitHits", 0)),
        unavailable_hits=int(extra.get(HITS_KEY, 0)),
        pending_answer=extra.get(ANSWER_KEY),
        model=(state.context.model or None) if same_mode else None,
    )


def _report(
    settings: Settings,
    store: Store,
    task: Task,
    result: TaskResult,
    source: TaskSource | None,
    wait_path: Path | None,
) -> None:
    if source is not None:
        try:
            source.report(task, result)
        except Exception as exc:  # the outcome is in SQLite; a report can be retried
            log.warning("could not report %s to %s: %s", task.id, task.source, exc)
            result.reason_codes.append("REPORT_FAILED")
        if wait_path is None:
            source.release(task, result)
    if wait_path is not None:
        store.release_claim(task.id, result.outcome.value)
        # Remove the old wait state only once the resumed run has ended, and not when the
        # task waits again (its new state was written to the same file).
        if result.outcome is not Outcome.STOPPED and result.wait_state != wait_path:
            wait_path.unlink(missing_ok=True)
            record.forget(settings, wait_path, store)
