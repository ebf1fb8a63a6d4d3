"""One `worker run`: lock, phase 0, sources, decision, mode, loop, report.

`run_once` is the library API behind the command (and behind `worker serve`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from worker.config import Settings
from worker.delivery import delivery_lines
from worker.errors import ConfigError, UsageError
from worker.fleet import fleet_session
from worker.kernel.model import TaskEnd
from worker.kernel.scheduling import Decision, Reason, Snapshot, decide
from worker.kernel.snapshot import preview, take_snapshot
from worker.models import Outcome
from worker.modes import Mode, ModeSet, load_modes, modes_path
from worker.process.locking import workspace_lock
from worker.sources.base import TaskSource
from worker.sources.fallback import LAST_RUN_KEY, SETUP_PROBLEM
from worker.sources.project_checks import probe, where_words
from worker.sources.registry import build_sources
from worker.state.diagnostics import run_diagnostics
from worker.state.folders import make_folders
from worker.state.run_report import RunOptions, RunReport
from worker.state.store import Store

if TYPE_CHECKING:
    from worker.results import TaskResult
    from worker.run.slots import Slot

__all__ = ["RunOptions", "RunReport", "preview", "request_stop", "run_once"]

log = logging.getLogger(__name__)

# A run's outcome when an error of worker's own, or of its set-up, ended it before its task had
# a result (`worker log` shows what failed); never a task's outcome.
ABORTED = "aborted"

_STOP = threading.Event()


def request_stop(reason: str = "stop requested") -> None:
    """Ask the running task (if any) to stop: its agent is ended, its work kept, the task
    released. Safe to call from a signal handler."""
    log.warning("stop requested: %s", reason)
    _STOP.set()


def run_once(settings: Settings, options: RunOptions | None = None) -> RunReport:
    options = options or RunOptions()
    modes = load_modes(modes_path(settings.workspace, settings.modes_file))
    if options.mode and options.mode not in modes.modes:  # before anything happens
        known = ", ".join(modes.modes)
        raise UsageError(f"--mode {options.mode!r}: unknown mode (known: {known})")
    if options.dry_run:
        return _dry_run(settings, options, modes)
    # Here, not at the top: a dry run records, prunes and notifies nothing.
    from worker.operator.heartbeat import around_run
    from worker.state import retention

    make_folders(settings)  # a folder that cannot be made: exit 78 naming its key, no task taken

    if options.use_worktree:
        from worker.process.workspace_git import ensure_repo

        ensure_repo(settings.workspace)
    # One run at a time under the workspace lock; or, with `max_parallel`, a slot for this
    # run's task and the workspace lock for its scheduling step only.
    slot = _slot(settings)
    with (
        slot or workspace_lock(settings),
        Store(settings.db_path) as store,
        fleet_session(settings, store),
    ):
        try:
            with around_run(settings) as ended:  # the heartbeat's pings, if one is set
                report = _run(settings, options, modes, store, slot)
                ended(report)
            retention.after_run(settings, store)  # at most once a day
            return report
        finally:
            _STOP.clear()  # a stop asked just before the run still stops it


def _slot(settings: Settings) -> Slot | None:
    if settings.max_parallel == 1:
        return None  # today's run: the workspace lock for the whole run
    from worker.run.slots import Slot  # psutil: not for a dry run

    return Slot(settings, _STOP)


def _dry_run(settings: Settings, options: RunOptions, modes: ModeSet) -> RunReport:
    snap, decision = preview(settings, options)
    report = RunReport(
        Outcome.DRY_RUN, reason_codes=list(decision.reason_codes), candidates=decision.candidates
    )
    report.notes = [
        f"maintenance is not taken: its checks cannot run: {skipped.detail}"
        for listing in snap.listings
        for skipped in listing.skipped
        if skipped.reason_code == SETUP_PROBLEM
    ]
    lines = delivery_lines(settings, options.use_worktree)
    report.notes += [f"delivery of {line}" for line in lines]
    # SOURCE_ERROR in words: which source could not be read, and why.
    report.source_errors = [e for listing in snap.listings for e in listing.errors][:10]
    if decision.task is None:
        return report
    mode_id, mode_reason = _pick_mode(decision, options, modes)
    mode = modes.get(mode_id)
    from worker.agents.registry import adapter_for, permission_args
    from worker.results import AgentRequest
    from worker.run.iteration import budget_left, task_cost_cap
    from worker.sandbox.box import for_task

    request = AgentRequest(
        prompt="",
        model=options.model or mode.model,
        cwd=settings.workspace,
        timeout_s=mode.iteration_timeout_s or settings.iteration_timeout_s,
        extra_args=permission_args(mode),
        max_budget_usd=budget_left(mode, task_cost_cap(settings, mode), 0.0),
    )
    report.task_id, report.source = decision.task.id, decision.source
    report.modes, report.mode_reason = [mode_id], mode_reason
    boxed = for_task(settings, decision.task.source)  # GitHub's tasks get untrusted_mode
    report.command = adapter_for(boxed, mode).command(request)
    if decision.task.source == "fallback":
        report.reason, problem = _maintenance_preview(settings, decision.task.ref)
        report.notes += problem
    report.notes += _spend_notes(settings, mode)
    return report


def _maintenance_preview(settings: Settings, ref: dict[str, Any]) -> tuple[str, list[str]]:
    """What maintenance would run and where, and a set-up problem seen before it runs (the
    interpreter is asked whether it has the module it would run)."""
    where = ref.get("environment") or "the workspace"
    commands = list(ref.get("commands", []))
    reason = f"would run in {where}, {where_words(settings)}: " + "; ".join(commands)
    problem = ref.get("problem") or probe(commands, settings)
    if not problem:
        return reason, []
    return reason, [f"the checks cannot run: {problem}; no agent would start (a set-up problem)"]


def _spend_notes(settings: Settings, mode: Mode) -> list[str]:
    """The agent CLI that cannot start, and what else would call a model (the reviewers)."""
    from worker.agents.infra import preflight  # only with a task to show
    from worker.review.settings import reviewers_line  # the section is made at its first use

    notes = []
    failure = preflight(settings, mode)
    if failure is not None:
        notes.append(f"{failure.message}: the run would stop before taking the task")
    notes.append(reviewers_line(settings.review))
    return notes


def _pick_mode(decision: Decision, options: RunOptions, modes: ModeSet) -> tuple[str, str]:
    if options.mode:
        return options.mode, "MODE_FORCED"
    if decision.wait is not None and decision.task is not None and decision.task.mode:
        if decision.task.mode in modes.modes:
            return decision.task.mode, "MODE_RESTORED"
        # The mode it waited in is gone from modes.json: detect one, rather than fail every
        # resume with a configuration error.
        log.warning(
            "%s waited in mode %r, which no longer exists", decision.task.id, decision.task.mode
        )
    assert decision.task is not None
    return modes.detect(decision.task)


def _run(
    settings: Settings, options: RunOptions, modes: ModeSet, store: Store, slot: Slot | None
) -> RunReport:
    t0 = time.monotonic()
    run_id = store.start_run(settings.machine_id, os.getpid())
    taken: list[Decision] = []  # the decision whose task was claimed, once there is one
    try:
        with run_diagnostics(settings.logs / f"run-{run_id}" / "worker.log"):
            return _take_and_run(settings, options, modes, store, run_id, t0, taken, slot)
    except BaseException as exc:
        _record_abort(store, run_id, taken, exc, time.monotonic() - t0)
        raise


def _record_abort(
    store: Store, run_id: int, taken: list[Decision], exc: BaseException, duration_s: float
) -> None:
    """The record of a run an unexpected error ended. A task result already recorded stands
    (the agent's work is not undone by a failure after it), with what failed added; else the
    outcome is `aborted` and a claimed task keeps its claim until its lease ends, so the next
    run takes it again."""
    what = f"{type(exc).__name__}: {exc}"
    row = store.db.execute("SELECT outcome, reason, reason_codes FROM runs WHERE id = ?", (run_id,))
    outcome, reason, codes = row.fetchone()
    if outcome:
        store.finish_run(
            run_id,
            reason=f"{reason or ''} (then worker failed: {what})"[:1000],
            reason_codes=[*json.loads(codes or "[]"), "FAILED_AFTER_RESULT"],
            duration_s=duration_s,
        )
        return
    task = taken[0].task if taken else None
    store.finish_run(
        run_id,
        task_id=task.id if task else None,
        source=taken[0].source if taken else None,
        outcome=ABORTED,
        reason=what[:1000],
        reason_codes=["RUN_ABORTED"],
        duration_s=duration_s,
    )


def _take_and_run(
    settings: Settings,
    options: RunOptions,
    modes: ModeSet,
    store: Store,
    run_id: int,
    t0: float,
    taken: list[Decision],
    slot: Slot | None = None,
) -> RunReport:
    from worker.operator.notify.events import on_run_start
    from worker.state import retention  # see run_once

    on_run_start(settings, store)  # Telegram's commands (approvals) first; unsent notifications
    last_run = store.get(LAST_RUN_KEY)
    sources = build_sources(
        settings,
        store,
        fallback_last_run=float(last_run) if last_run else None,
        open_pr=options.open_pr,
    )
    by_name = {source.name: source for source in sources}
    orphans, recovered = _recover(settings, store, sources)
    _close_dead_runs(settings, store, modes, run_id)
    notes = [Reason.LEASE_EXPIRED] * bool(recovered) + [Reason.ORPHAN_AGENT_ENDED] * bool(orphans)
    snap = _observe(settings, sources, store, options, run_id, t0, notes, slot)
    decision, excluded = _decide_and_claim(
        settings, options, modes, store, run_id, snap, by_name, slot
    )
    if decision.task is not None:
        taken.append(decision)
    from worker.kernel.effects import apply as apply_kernel

    applied = apply_kernel(settings, store, by_name, decision, snap.controls, run_id)
    mode_id, mode_reason = (None, None)
    if decision.task is not None:
        mode_id, mode_reason = _pick_mode(decision, options, modes)
    store.record_decision(
        run_id,
        machine_id=settings.machine_id,
        task_id=decision.task.id if decision.task else None,
        source=decision.source,
        mode=mode_id,
        reason_codes=[*decision.reason_codes, *([mode_reason] if mode_reason else [])],
        candidates=decision.candidates,
        latency_ms=(time.monotonic() - t0) * 1000,
        detail=retention.decision_detail(
            decision.task is None,
            {
                "skipped": [s.__dict__ for ls in snap.listings for s in ls.skipped][:50],
                "errors": [e for ls in snap.listings for e in ls.errors][:20],
                "recovered": recovered,
                "orphans_ended": orphans,
                "excluded": sorted(excluded),
                "seen": list(snap.seen),  # what the looks at pull requests saw (`why`)
                "kernel": {**decision.event(), "applied": applied},
            },
        ),
    )
    if slot is not None:
        slot.release_scheduling()  # claimed and recorded: the next run may schedule
    report = RunReport(
        Outcome.IDLE,
        run_id=run_id,
        reason_codes=list(decision.reason_codes),
        candidates=decision.candidates,
        mode_reason=mode_reason,
        notes=list(snap.seen),
    )
    if decision.task is None or mode_id is None:
        _finish_idle(settings, store, run_id, t0, report, list(snap.ended))
        return report
    from worker.run.tasks import execute

    result = execute(settings, options, modes, store, run_id, decision, mode_id, by_name, _STOP)
    _finish_task(store, run_id, t0, report, decision, result)
    _record_ends(settings, store, list(snap.ended))
    return report


def _finish_idle(
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
    _record_ends(settings, store, ended)


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


def _record_ends(settings: Settings, store: Store, ended: list[TaskEnd]) -> None:
    """Each other task phase 0 ended gets a record of its own (`log`, `show TASK`)."""
    for end in ended:
        record = RunReport(Outcome.IDLE)
        _as_ended(record, end)
        _close(store, store.start_run(settings.machine_id, os.getpid()), record, 0.0)


def _recover(
    settings: Settings, store: Store, sources: list[TaskSource]
) -> tuple[list[str], list[str]]:
    """The agents dead runs left working, ended; then the claims whose lease ran out or whose
    run is gone, given back (in that order: before any claim comes back, its orphan agent has
    ended)."""
    from worker.process.orphans import end_orphans, lapse_dead_claims  # psutil: not for a dry run

    orphans = end_orphans(store, settings.machine_id)
    lapse_dead_claims(store, settings.machine_id)  # their tasks come back just below
    recovered = []
    for source in sources:
        recover = getattr(source, "recover_expired", None)
        if recover is not None:
            recovered += recover()
    return orphans, recovered


def _close_dead_runs(settings: Settings, store: Store, modes: ModeSet, run_id: int) -> None:
    """Runs left open by a process that died: closed, their paid iterations counted."""
    from worker.state.dead_runs import close_dead_runs  # psutil, as _recover

    def agent_of(mode_id: str) -> str | None:
        mode = modes.modes.get(mode_id)
        return mode.agent if mode is not None else None

    close_dead_runs(store, settings.machine_id, settings.logs, agent_of, run_id)


def _observe(
    settings: Settings,
    sources: list[TaskSource],
    store: Store,
    options: RunOptions,
    run_id: int,
    t0: float,
    notes: list[Reason],
    slot: Slot | None,
) -> Snapshot:
    """The run's snapshot with `notes` (a failure to take it is recorded as the run's
    decision); in a slot, with the other slots' tasks and the shared limits."""
    try:
        snap = take_snapshot(settings, sources, store, options, dry_run=False)
    except Exception as exc:
        _record_error(settings, store, run_id, str(exc), (time.monotonic() - t0) * 1000)
        raise
    snap = dataclasses.replace(snap, notes=(*snap.notes, *notes))
    return snap if slot is None else slot.observe(store, snap)


def _decide_and_claim(
    settings: Settings,
    options: RunOptions,
    modes: ModeSet,
    store: Store,
    run_id: int,
    snap: Snapshot,
    by_name: dict[str, TaskSource],
    slot: Slot | None = None,
) -> tuple[Decision, set[str]]:
    """Decide, and claim the chosen task; a task another run claimed first is left out and
    the decision taken again. Returns the decision and the ids left out. In a slot, a shared
    limit may hold the task back (the decision is then taken again with nothing to start)."""
    excluded: set[str] = set()
    while True:
        decision = decide(dataclasses.replace(snap, excluded=frozenset(excluded)))
        task = decision.task
        if task is None:
            return decision, excluded
        mode = modes.get(_pick_mode(decision, options, modes)[0])
        _preflight(settings, store, run_id, mode, task.source, options.use_worktree)
        if slot is not None:
            decision, held = slot.admit(store, options, decision, mode)
            if held is not None:
                snap = dataclasses.replace(snap, held=held)
                return decide(dataclasses.replace(snap, excluded=frozenset(excluded))), excluded
        if _claim(decision, by_name, store, settings, run_id):
            if slot is not None:
                slot.started(run_id, task)
            return decision, excluded
        excluded.add(task.id)


def _finish_task(
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
    store.finish_run(
        run_id,
        task_id=decision.task.id,
        source=decision.source,
        outcome=result.outcome.value,
        reason=result.reason[:1000],
        modes=result.modes,
        iterations=len(result.iterations),
        cost_usd=result.cost_usd,
        duration_s=report.duration_s,
        branch=result.branch,
        reason_codes=report.reason_codes,
    )


def _preflight(
    settings: Settings, store: Store, run_id: int, mode: Mode, source: str, use_worktree: bool
) -> None:
    """Before any claim: the agent that would start can start (in the box the task's source
    asks for), and the work can be delivered as configured (a worktree needs a repository),
    else no task is touched (and `worker why` says what to fix)."""
    from worker.agents.infra import preflight  # only with a task to take
    from worker.process.workspace_git import delivery_problem
    from worker.sandbox.box import for_task

    failure = preflight(for_task(settings, source), mode)
    problem = failure.message if failure else delivery_problem(settings, source, use_worktree)
    if problem is None:
        return
    message = f"{problem}. No task was taken."
    _record_error(settings, store, run_id, message, 0.0)
    raise ConfigError(message)


def _record_error(
    settings: Settings, store: Store, run_id: int, error: str, latency_ms: float
) -> None:
    """The decision of a run that an error kept from taking a task (what `worker why` shows)."""
    store.record_decision(
        run_id,
        machine_id=settings.machine_id,
        reason_codes=["ERROR"],
        candidates={},
        latency_ms=latency_ms,
        error=error,
    )


def _claim(
    decision: Decision,
    sources: dict[str, TaskSource],
    store: Store,
    settings: Settings,
    run_id: int,
) -> bool:
    assert decision.task is not None
    if decision.wait is not None:
        return store.claim(
            decision.task.id,
            "wait",
            settings.machine_id,
            os.getpid(),
            settings.lease_seconds,
            run_id=run_id,
        )
    return sources[decision.task.source].claim(decision.task, run_id)
