"""One `worker run`: lock, phase 0, sources, decision, mode, loop, report.

`run_once` is the library API behind the command (and behind `worker serve`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from worker.config import Settings
from worker.errors import UsageError
from worker.fleet import fleet_session
from worker.kernel.scheduling import Decision, Reason, Snapshot
from worker.kernel.snapshot import preview
from worker.models import Outcome
from worker.modes import ModeSet, load_modes, modes_path
from worker.process.locking import workspace_lock
from worker.run.choice import decide_and_claim, observe, pick_mode
from worker.run.dry_run import dry_run
from worker.run.recovery import ABORTED, close_open_runs, record_abort, recover
from worker.run.run_end import finish_idle, finish_task, record_ends
from worker.sources.base import TaskSource
from worker.sources.fallback import LAST_RUN_KEY
from worker.sources.registry import build_sources
from worker.state.diagnostics import run_diagnostics
from worker.state.folders import make_folders
from worker.state.run_report import RunOptions, RunReport
from worker.state.store import Store

if TYPE_CHECKING:
    from worker.run.slots import Slot

__all__ = ["ABORTED", "RunOptions", "RunReport", "preview", "request_stop", "run_once"]

log = logging.getLogger(__name__)

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
        return dry_run(settings, options, modes)
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
        record_abort(store, run_id, taken, exc, time.monotonic() - t0)
        raise


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
    sources = _sources(settings, store, options)
    by_name = {source.name: source for source in sources}
    orphans, recovered = recover(settings, store, sources)
    close_open_runs(settings, store, modes, run_id)
    notes = [Reason.LEASE_EXPIRED] * bool(recovered) + [Reason.ORPHAN_AGENT_ENDED] * bool(orphans)
    snap = observe(settings, sources, store, options, run_id, t0, notes, slot)
    decision, excluded = decide_and_claim(
        settings, options, modes, store, run_id, snap, by_name, slot
    )
    if decision.task is not None:
        taken.append(decision)
    from worker.kernel.effects import apply as apply_kernel

    applied = apply_kernel(settings, store, by_name, decision, snap.controls, run_id)
    mode_id, mode_reason = (None, None)
    if decision.task is not None:
        mode_id, mode_reason = pick_mode(decision, options, modes)
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
            _decision_detail(snap, decision, recovered, orphans, excluded, applied),
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
        finish_idle(settings, store, run_id, t0, report, list(snap.ended))
        return report
    from worker.run.tasks import execute

    result = execute(settings, options, modes, store, run_id, decision, mode_id, by_name, _STOP)
    finish_task(store, run_id, t0, report, decision, result)
    record_ends(settings, store, list(snap.ended))
    return report


def _sources(settings: Settings, store: Store, options: RunOptions) -> list[TaskSource]:
    """The sources in priority order (the maintenance task told when the last one ran)."""
    last_run = store.get(LAST_RUN_KEY)
    return build_sources(
        settings,
        store,
        fallback_last_run=float(last_run) if last_run else None,
        open_pr=options.open_pr,
    )


def _decision_detail(
    snap: Snapshot,
    decision: Decision,
    recovered: list[str],
    orphans: list[str],
    excluded: set[str],
    applied: list[dict[str, Any]],
) -> dict[str, Any]:
    """What the decision's record keeps beside its reason codes (`worker why` reads it)."""
    return {
        "skipped": [s.__dict__ for ls in snap.listings for s in ls.skipped][:50],
        "errors": [e for ls in snap.listings for e in ls.errors][:20],
        "recovered": recovered,
        "orphans_ended": orphans,
        "excluded": sorted(excluded),
        "seen": list(snap.seen),  # what the looks at pull requests saw (`why`)
        "kernel": {**decision.event(), "applied": applied},
    }
