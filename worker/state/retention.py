"""Retention: history is kept for a while, not forever.

Runs (with their iterations), ended claims and the CLI folders of tasks long ended are kept
`runs_days`, decisions `decisions_days`, run logs `logs_days` and at most `logs_max_bytes`
(oldest removed first).
An idle decision keeps counts, not lists, so that a queue of 1,000 waits does not write
kilobytes on every cron tick. Pruning runs at the end of a run at most every
`interval_hours`, and on demand with `worker prune [--dry-run]`. Freed database pages are
reused by later rows; the file does not shrink (no VACUUM, which would rewrite it all).
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from worker.config import Settings
from worker.state.retention_cli import sweep_cli_folders
from worker.state.store import Store

log = logging.getLogger(__name__)

LAST_PRUNE_KEY = "retention.last_prune"
_DAY_S = 86400.0

# Lists of an idle decision's detail that grow with the queue: stored as their lengths.
_COUNTED = ("skipped", "paused", "queued", "excluded")


def decision_detail(idle: bool, detail: dict[str, Any]) -> dict[str, Any]:
    """The detail to store with a decision: as it is when a task was taken; for an idle
    decision, the lists that grow with the queue become counts (errors: the first three)."""
    if not idle:
        return detail
    out = _counted(detail)
    errors = detail.get("errors")
    if isinstance(errors, list):
        out["errors"] = [str(e)[:300] for e in errors[:3]]
    kernel = detail.get("kernel")
    if isinstance(kernel, dict):
        out["kernel"] = _counted(kernel)
    return out


def _counted(data: dict[str, Any]) -> dict[str, Any]:
    return {k: len(v) if k in _COUNTED and isinstance(v, list) else v for k, v in data.items()}


@dataclass
class PruneReport:
    dry_run: bool
    runs: int = 0
    iterations: int = 0
    decisions: int = 0
    claims: int = 0
    log_folders: int = 0
    log_bytes: int = 0
    cli_folders: int = 0  # per-task CLI folders of tasks long ended (worker.state.retention_cli)
    removed_logs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def prune(
    settings: Settings, store: Store, dry_run: bool = False, now: float | None = None
) -> PruneReport:
    """Delete what is past its retention (or count it, with `dry_run`)."""
    now = time.time() if now is None else now
    keep = settings.retention
    report = PruneReport(dry_run)
    runs_before = now - keep.runs_days * _DAY_S
    decisions_before = now - keep.decisions_days * _DAY_S
    old_runs = "SELECT id FROM runs WHERE COALESCE(ended_at, started_at) < ?"
    deletions = (  # iterations before their runs: they are found through them
        ("iterations", f"FROM iterations WHERE run_id IN ({old_runs})", runs_before),
        ("runs", "FROM runs WHERE COALESCE(ended_at, started_at) < ?", runs_before),
        ("decisions", "FROM decisions WHERE at < ?", decisions_before),
        ("claims", "FROM claims WHERE state != 'active' AND lease_until < ?", runs_before),
    )
    with store.transaction() as db:
        for name, where, before in deletions:
            if dry_run:
                setattr(
                    report, name, db.execute(f"SELECT COUNT(*) {where}", (before,)).fetchone()[0]
                )
            else:
                setattr(report, name, db.execute(f"DELETE {where}", (before,)).rowcount)
        if not dry_run and _has_table(db, "run_events"):  # the progress journal (`log -f`)
            db.execute("DELETE FROM run_events WHERE at < ?", (runs_before,))
    if not dry_run:
        store.put(LAST_PRUNE_KEY, repr(now))
    _prune_logs(settings, report, now)
    report.cli_folders = sweep_cli_folders(settings, store, now, dry_run)
    return report


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    found = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return found.fetchone() is not None


def _prune_logs(settings: Settings, report: PruneReport, now: float) -> None:
    """Run log folders older than `logs_days`, then the oldest until under `logs_max_bytes`."""
    keep = settings.retention
    folders = []
    for path in _children(settings.logs):
        folders.append((_mtime(path), _size(path), path))
    folders.sort()
    total = sum(size for _, size, _ in folders)
    for mtime, size, path in folders:
        if mtime >= now - keep.logs_days * _DAY_S and total <= keep.logs_max_bytes:
            break
        total -= size
        report.log_folders += 1
        report.log_bytes += size
        report.removed_logs.append(path.name)
        if not report.dry_run:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def _children(folder: Path) -> list[Path]:
    try:
        return [p for p in folder.iterdir() if not p.name.startswith(".")]
    except OSError:
        return []


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _size(path: Path) -> int:
    if not path.is_dir():
        try:
            return path.stat().st_size
        except OSError:
            return 0
    total = 0
    for child in path.rglob("*"):
        try:
            total += child.stat().st_size if child.is_file() else 0
        except OSError:
            continue
    return total


def after_run(settings: Settings, store: Store, now: float | None = None) -> PruneReport | None:
    """At the end of a run: prune when the last pruning is older than `interval_hours`.
    Never fails the run: a problem is logged and tried again next time."""
    keep = settings.retention
    now = time.time() if now is None else now
    if not keep.enabled:
        return None
    last = store.get(LAST_PRUNE_KEY)
    if last is not None and now - float(last) < keep.interval_hours * 3600:
        return None
    try:
        return prune(settings, store, now=now)
    except Exception as exc:  # history kept a little longer is no reason to fail a task
        log.warning("retention: pruning failed: %s", exc)
        return None


def prune_workspace(settings: Settings, dry_run: bool = False) -> PruneReport:
    """`worker prune`: under the workspace lock, so that no run writes meanwhile; a dry run
    reads a database that may not exist yet."""
    from worker.process.locking import workspace_lock

    if dry_run and not settings.db_path.exists():
        report = PruneReport(dry_run=True)
        _prune_logs(settings, report, time.time())
        report.cli_folders = sweep_cli_folders(settings, None, time.time(), dry_run=True)
        return report
    busy = "a worker run is active in this workspace; try again when it ends"
    with workspace_lock(settings, busy), Store(settings.db_path) as store:
        return prune(settings, store, dry_run=dry_run)
