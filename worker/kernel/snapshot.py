"""What a run sees before it decides: phase 0's waits, the sources' listings, the kernel's
observations; and `preview`, what a run would see and decide now, touching nothing.

`worker run` takes its snapshot here, and so do `worker queue` and `worker status` (the
queue per source), which must show what a run would do without claiming, writing or moving.
"""

from __future__ import annotations

import dataclasses
import logging

from worker.config import Settings
from worker.errors import UsageError
from worker.kernel.decide import decide
from worker.kernel.model import Decision, Reason, Snapshot
from worker.kernel.observe import observe
from worker.models import Task
from worker.sources.base import Listing, TaskSource
from worker.sources.fallback import LAST_RUN_KEY
from worker.sources.registry import build_sources
from worker.state.run_report import RunOptions
from worker.state.store import Store
from worker.waits import phase0
from worker.waits.state import file_name

log = logging.getLogger(__name__)


def take_snapshot(
    settings: Settings,
    sources: list[TaskSource],
    store: Store | None,
    options: RunOptions,
    dry_run: bool,
) -> Snapshot:
    """Phase 0's waits, the sources' listings (or the one task `--task-id` forces) and the
    kernel's observations: everything `decide` looks at."""
    scan = phase0.scan(settings, store, dry_run=dry_run)
    forced = _find(settings, sources, options.task_id) if options.task_id else None
    listings = [] if forced else [_safe_list(source) for source in sources]
    notes = tuple(Reason.SOURCE_ERROR for _ in scan.errors[:1])
    notes += tuple(Reason.PR_ENDED for _ in scan.ends[:1])
    snap = Snapshot(
        listings=tuple(listings),
        ready_waits=() if forced else tuple(scan.ready),
        pending_waits=scan.pending,
        forced=forced,
        notes=notes,
        ended=tuple(scan.ends),
        seen=tuple(scan.seen[:10]),
    )
    return observe(settings, store, snap, dry_run=dry_run)  # orders, paused flows, leftovers


def _safe_list(source: TaskSource) -> Listing:
    try:
        return source.list()
    except Exception as exc:  # one broken source must not stop the others
        log.warning("source %s failed: %s", source.name, exc, exc_info=True)
        return Listing(source.name, errors=[f"{source.name}: {exc}"])


def _find(settings: Settings, sources: list[TaskSource], task_id: str) -> Task:
    for source in sources:
        task = source.find(task_id)
        if task is None:
            continue
        if (settings.wait_states / file_name(task.id)).exists():
            # A fresh run beside the wait state would run the task twice.
            raise UsageError(
                f"--task-id {task_id}: the task is waiting; answer it (`worker waits approve`)"
                " or cancel its wait (`worker waits cancel`) first"
            )
        return task
    names = ", ".join(source.name for source in sources)
    raise UsageError(f"--task-id {task_id}: no such task in {names}")


def preview(settings: Settings, options: RunOptions | None = None) -> tuple[Snapshot, Decision]:
    """What a run would see and decide now, with no claim, write or move (`worker queue`)."""
    last_run = _read_kv_readonly(settings, LAST_RUN_KEY)
    sources = build_sources(
        settings, None, dry_run=True, fallback_last_run=float(last_run) if last_run else None
    )
    snap = take_snapshot(settings, sources, None, options or RunOptions(), dry_run=True)
    if settings.max_parallel > 1:  # what the other slots run now is not taken again
        from worker.state.slot_records import running  # psutil: only with slots

        others = frozenset(record.task_id for record in running(settings))
        snap = dataclasses.replace(snap, others_running=others, slots=settings.max_parallel)
    return snap, decide(snap)


def _read_kv_readonly(settings: Settings, key: str) -> str | None:
    if not settings.db_path.exists():
        return None
    import sqlite3  # only with a database to read

    try:
        db = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return row[0] if row else None
