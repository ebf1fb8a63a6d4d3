"""Executing one chosen task: set up, loop, report, release, clean up."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from worker.config import Settings
from worker.delivery import task_in_worktree
from worker.kernel.scheduling import Decision
from worker.kernel.watcher import StopWatcher
from worker.models import Outcome, Task, TaskResult
from worker.modes import ModeSet
from worker.operator.notify.events import after_task as notify_after_task
from worker.process.orphans import start_time
from worker.process.workspace_git import (
    commit_message,
    create_worktree,
    drop_if_empty,
    finish_worktree,
)
from worker.review.hooks import TaskSections, after_task, task_sections
from worker.run.guard import WorkspaceGuard
from worker.run.infra import ANSWER_KEY, HITS_KEY
from worker.run.loop import LoopContext, StartPoint, run_task
from worker.sandbox.box import for_task
from worker.sandbox.cli_home import folder_for as cli_folder_for
from worker.sandbox.cli_home import remove as remove_cli_folder
from worker.sandbox.cli_home import untrusted
from worker.sources.base import TaskSource
from worker.sources.fallback import (
    SETUP_PROBLEM,
    SETUP_PROBLEM_KNOWN,
    CheckResult,
    failure_report,
    forget_problem,
    remember_problem,
    run_checks,
)
from worker.sources.github.settings import next_round
from worker.state.progress import Tracker, review_step
from worker.state.run_report import RunOptions
from worker.state.store import Store
from worker.supervision.factory import make_supervisor
from worker.waits import record
from worker.waits.saving import WaitPoint, save_pull_request_wait

log = logging.getLogger(__name__)

# A task that ended so has nothing to resume (a stopped one is taken again, a waiting one
# resumes its session).
ENDED = frozenset({Outcome.SUCCESS, Outcome.FAILURE, Outcome.CANCELLED, Outcome.EXPIRED})


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
    settings = for_task(settings, task.source)  # GitHub's tasks: never unboxed by choice
    source = sources.get(task.source)
    start = StartPoint(mode=mode_id)
    wait_path: Path | None = None
    if decision.wait is not None:
        wait_path = decision.wait.ref
        start = _restore(settings, wait_path, mode_id, decision.wait.answer)
    cwd, branch = settings.workspace, None
    # Delivered on a branch (`[github] delivery`, `--use-worktree`), never in the operator's
    # checkout; a task that follows its pull request works on the pull request's branch again.
    if task_in_worktree(settings, task.source, task.ref, options.use_worktree):
        cwd, branch = create_worktree(settings.workspace, settings.state / "worktrees", task.id)
    if decision.wait is not None and "pr" in task.ref:
        start.resume_answer = _base_brought_in(settings, task, cwd, branch, start.resume_answer)
    chosen = _sections(settings, store, task)
    ctx = LoopContext(
        settings=settings,
        modes=modes,
        store=store,
        run_id=run_id,
        cwd=cwd,
        supervisor=make_supervisor(settings, task, run_id),
        forced_model=options.model,
        stop_event=stop,
        sections=chosen.sections,
        section_changes=chosen.changes,
        renew=(lambda: source.renew(task)) if source is not None else (lambda: None),
        on_agent_start=lambda pid: store.note_agent(task.id, pid, start_time(pid)),
        cli_folder=cli_folder_for(settings.state, task.id) if untrusted(task.source) else None,
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
            message = commit_message(task.id, task.title, result, done)
            committed = finish_worktree(settings.workspace, cwd, message, _author(source))
            # Maintenance that changed nothing leaves no branch (a task's own branch is its
            # delivery's to keep or delete: worker.sources.github.delivery).
            if not committed and task.source == "fallback":
                branch = None if drop_if_empty(settings.workspace, branch) else branch
        restored = guard.check(store, settings.logs / f"run-{run_id}")
    result.reason_codes += restored
    result = watcher.settle(result, mode_id)
    result.branch = branch
    if decision.wait is not None and "pr" in task.ref:
        result.answered = start.resume_answer or ""  # the reply on the pull request says it
    return _conclude(settings, options, store, run_id, result, source, wait_path)


def _conclude(
    settings: Settings,
    options: RunOptions,
    store: Store,
    run_id: int,
    result: TaskResult,
    source: TaskSource | None,
    wait_path: Path | None,
) -> TaskResult:
    """The task's end: recorded, reported to its source, notified, then the reviewers."""
    task = result.task
    # Before the source hears of it: a kill from here on loses nothing.
    store.record_result(run_id, **result.record())
    _report(settings, store, task, result, source, wait_path)
    if result.outcome in ENDED and result.wait_state is None:
        remove_cli_folder(settings.state, task.id)  # ended for good: no session to resume
    notify_after_task(settings, store, result, run_id)  # queued, sent, never raises
    if SETUP_PROBLEM in result.reason_codes:
        return result  # no agent worked: nothing for the reviewers to look at
    with review_step(store, options.progress) as review:
        try:
            after_task(settings, store, result)
        except Exception as exc:  # reviewers never stop the task queue
            log.warning("reviewers failed after %s: %s", task.id, exc)
    if review.ran:
        result.review_s, result.review_cost_usd = review.duration_s, review.cost_usd
    return result


def _author(source: TaskSource | None) -> tuple[str, str] | None:
    """Who the task's commits are by: its source's say (GitHub: the token's user), else
    worker's bot identity."""
    author = getattr(source, "commit_author", None)
    try:
        return author() if callable(author) else None
    except Exception as exc:  # the commit goes on, by the bot
        log.warning("could not tell the commit author: %s", exc)
        return None


def _run(ctx: LoopContext, task: Task, start: StartPoint) -> TaskResult:
    commands = list(task.ref.get("commands", [])) if task.source == "fallback" else []
    if commands and start.resume_answer is None:
        problem = task.ref.get("problem")
        checks = [] if problem else _checks(ctx, task, commands)
        problem = problem or next((check.problem for check in checks if check.problem), None)
        if problem:
            return _setup_problem(ctx, task, problem)
        forget_problem(ctx.store)
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


def _checks(ctx: LoopContext, task: Task, commands: list[str]) -> list[CheckResult]:
    return run_checks(
        commands,
        ctx.cwd,
        ctx.settings.fallback.command_timeout_s,
        ctx.settings.logs / f"run-{ctx.run_id}",
        settings=ctx.settings,
        own_env=bool(task.ref.get("own_env", True)),
    )


def _setup_problem(ctx: LoopContext, task: Task, problem: str) -> TaskResult:
    """Checks that could not run: a person's to fix, in words; no agent is started. Told once
    (`notify`); maintenance comes back when the project or settings change, or after its
    interval (`FallbackSource.list`)."""
    news = remember_problem(ctx.store, ctx.settings, task, problem)
    where = task.ref.get("environment") or "the project"
    reason = (
        f"the maintenance checks cannot run in {where}: {problem}. No agent was started. "
        "Fix the project's environment, or set [fallback] test to the command that runs its "
        "tests; maintenance tries again when the project or worker.toml changes"
    )
    codes = [SETUP_PROBLEM] if news else [SETUP_PROBLEM, SETUP_PROBLEM_KNOWN]
    return TaskResult(task, Outcome.FAILURE, reason, codes, modes=[])


def _sections(settings: Settings, store: Store, task: Task) -> TaskSections:
    try:
        return task_sections(settings, store, task)
    except Exception as exc:  # knowledge is a help, never a blocker
        log.warning("could not build the knowledge sections: %s", exc)
        return TaskSections()


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
        session_mode=state.context.mode,
    )


def _base_brought_in(
    settings: Settings, task: Task, cwd: Path, branch: str | None, answer: str | None
) -> str:
    """A pull request in conflict with its base: worker merges the base in first, so that the
    agent resolves the conflicts in the files; what it did goes with the answer."""
    from worker.waits.github_pr import CONFLICT

    base = str(task.ref.get("prBase") or "")
    if not answer or CONFLICT not in answer or not base:
        return answer or ""
    from worker.sources.github.client import token_from_env
    from worker.sources.github.delivery import bring_base_in

    said = bring_base_in(
        settings.github,
        cwd,
        base,
        token_from_env(),
        workspace=settings.workspace,
        branch=branch or "",
        repo=task.ref.get("repo"),
    )
    return f"{answer}\n\n{said}"


def _follow(settings: Settings, task: Task, result: TaskResult) -> None:
    """The report opened or updated the task's pull request: the task waits on it."""
    assert result.pull_request is not None
    last = result.iterations[-1] if result.iterations else None
    point = WaitPoint(
        task,
        mode=result.mode or "",
        model=last.model if last else "",
        iteration=last.iteration if last else 1,
        output=result.final_text,
        session_id=result.session_id,
        modes_used=list(result.modes),
        cost_usd=result.cost_usd,
    )
    rounds = next_round(task.ref)
    try:
        result.wait_state = save_pull_request_wait(settings, point, result.pull_request, rounds)
    except Exception as exc:  # the pull request stays; the task cannot follow it
        log.warning("could not follow the pull request of %s: %s", task.id, exc)
        result.reason_codes.append("PR_FOLLOW_FAILED")


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
        if result.pull_request is not None and result.outcome is Outcome.WAITING:
            _follow(settings, task, result)
        if wait_path is None:
            source.release(task, result)
    if wait_path is not None:
        store.release_claim(task.id, result.outcome.value)
        # Remove the old wait state only once the resumed run has ended, and not when the
        # task waits again (its new state was written to the same file).
        if result.outcome is not Outcome.STOPPED and result.wait_state != wait_path:
            wait_path.unlink(missing_ok=True)
            record.forget(settings, wait_path, store)
