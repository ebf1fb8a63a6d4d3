"""The run's choice: the snapshot it decides on, the decision, the mode, the preflight and the
claim (the decision taken again when another run claimed the task first)."""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import TYPE_CHECKING

from worker.config import Settings
from worker.errors import ConfigError
from worker.kernel.scheduling import Decision, Reason, Snapshot, decide
from worker.kernel.snapshot import take_snapshot
from worker.modes import Mode, ModeSet
from worker.sources.base import TaskSource
from worker.state.run_report import RunOptions
from worker.state.store import Store

if TYPE_CHECKING:
    from worker.run.slots import Slot

log = logging.getLogger(__name__)


def observe(
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


def decide_and_claim(
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
        mode = modes.get(pick_mode(decision, options, modes)[0])
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


def pick_mode(decision: Decision, options: RunOptions, modes: ModeSet) -> tuple[str, str]:
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
