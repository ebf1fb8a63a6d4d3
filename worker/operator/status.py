"""The service behind `worker status` (and Telegram's `/status`): what `worker.operator.integrity`
shows (the waits, the claims and their leases, files set aside, the last run) plus the
running task as its heartbeat tells it, the queue per source, the last failures, today's
spend and the notifications not sent yet."""

from __future__ import annotations

import logging
import time
from typing import Any

from worker.config import Settings
from worker.humanize import CONDITION_WORDS, duration
from worker.kernel.snapshot import preview
from worker.operator.integrity import status as integrity_status
from worker.process.platform.process import alive
from worker.sources.fallback import SETUP_PROBLEM, load_problem
from worker.state.schema_version import tolerating_newer_schema
from worker.state.store import Store

log = logging.getLogger(__name__)

_FAILED = ("failure", "error")


def status(settings: Settings, with_queue: bool = True, check: bool = False) -> dict[str, Any]:
    """The integrity view (waits, claims and their leases, files set aside, the last run,
    the database check) with the running task, the queue, failures, spend and unsent
    notifications added. A database from a newer worker is read as it is, and named in
    `database_problems` (a run refuses it)."""
    with tolerating_newer_schema() as newer:
        data = _status(settings, with_queue, check)
    data["database_problems"] = newer
    return data


def _status(settings: Settings, with_queue: bool, check: bool) -> dict[str, Any]:
    data = integrity_status(settings, check=check)
    data.update(running=[], failures=[], spent_today_usd=0.0, unsent=0)
    data["daily_cost_cap_usd"] = settings.daily_cost_cap_usd
    data["max_parallel"] = settings.max_parallel  # slots: tasks at once
    data["queue"], data["inbox_odd"] = queue_depth(settings) if with_queue else (None, [])
    # Maintenance's set-up problem, told in words while maintenance is on.
    known = load_problem(settings, None) if settings.fallback.enabled is not False else None
    data["maintenance_problem"] = known.as_dict() if known is not None else None
    if not settings.db_path.exists():
        return data
    # Here, not at the top: with no database yet there is no run, spend or notification to read.
    from worker.operator.notify.outbox import pending
    from worker.run.costs import spent_today
    from worker.state.run_log import describe, runs_where

    now = time.time()
    with Store(settings.db_path) as store:
        data["running"] = _running(store, settings.machine_id, now)
        # A set-up problem is no task failure: it is `maintenance_problem`, said in words.
        setup = f'%"{SETUP_PROBLEM}"%'
        failed = runs_where(
            store,
            "outcome IN (?, ?) AND COALESCE(reason_codes, '') NOT LIKE ?",
            (*_FAILED, setup),
            5,
        )
        data["failures"] = [
            {k: row[k] for k in ("run", "started_at", "task", "title", "outcome", "reason")}
            | {"codes": row["outcome_codes"]}
            for row in describe(store, failed)
        ]
        data["spent_today_usd"] = round(spent_today(store, settings.machine_id), 6)
        data["unsent"] = len(pending(store))
    return data


def queue_depth(settings: Settings) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """Tasks waiting their turn, per source, as a run would list them now; and the inbox's
    entries that are no message file (a named pipe, a link to nothing), with what they are."""
    try:
        snap, _ = preview(settings)
    except Exception as exc:  # a source that cannot be read is named, not fatal
        log.debug("status: queue not read", exc_info=True)
        return {"error": str(exc)}, []
    depth = {listing.source: len(listing.tasks) for listing in snap.listings}
    depth["ready waits"] = len(snap.ready_waits)
    odd = [
        {"source": listing.source, "name": skipped.task_id, "what": skipped.detail}
        for listing in snap.listings
        for skipped in listing.skipped
        if skipped.reason_code == "NOT_A_MESSAGE_FILE"
    ]
    return depth, odd


def summary_lines(settings: Settings) -> list[str]:
    """`worker status` in a few lines (for a chat)."""
    data = status(settings, with_queue=False)
    lines = [f"worker on {data['machine_id']}"]
    working = [run for run in data["running"] if run["task_id"]]
    lines += [_running_line(run) for run in working]
    if not working:
        # A run with no task yet (this very run, reading the command) is not a task running.
        lines.append("running: nothing (idle)")
    for wait in data["waiting"]:
        what = CONDITION_WORDS.get(wait["resume_when"], wait["resume_when"])
        lines.append(f"waiting: {wait['task_id']} for {what} ({duration(wait['waiting_s'])})")
    for fail in data["failures"][:3]:
        lines.append(f"failed: {fail['task']}: {(fail['reason'] or '')[:100]}")
    cap = data["daily_cost_cap_usd"]
    lines.append(
        f"spent today: ${data['spent_today_usd']:.2f}" + (f" of ${cap:.2f}" if cap else "")
    )
    return lines


def _running_line(run: dict[str, Any]) -> str:
    """One running task in words: with its heartbeat (iteration, time, spend, tool), or as
    starting while the first heartbeat is not written yet."""
    name = f"{run['task_id']} ({run['title']})" if run["title"] else run["task_id"]
    if not run["max_iterations"]:
        return f"running: {name}, starting ({duration(run['elapsed_s'])})"
    return (
        f"running: {name}, iteration {run['iteration']}/{run['max_iterations']}, "
        f"{duration(run['elapsed_s'])}, ${run['cost_usd']:.2f}"
        + (f", {run['tool']}" if run["tool"] else "")
    )


def _running(store: Store, machine_id: str, now: float) -> list[dict[str, Any]]:
    from worker.state.progress import progress_of  # with a database only (see status)

    rows = [
        dict(r) for r in store.db.execute("SELECT * FROM runs WHERE ended_at IS NULL ORDER BY id")
    ]
    beats = progress_of(store, [r["id"] for r in rows])
    found = []
    for run in rows:
        if run["machine_id"] == machine_id and not alive(run["pid"]):
            continue  # a crashed run; its claim's lease brings its task back
        beat = beats.get(run["id"]) or {}
        found.append(
            {
                "run": run["id"],
                "machine": run["machine_id"],
                "pid": run["pid"],
                "task_id": beat.get("task_id") or run["task_id"],
                "title": beat.get("title", ""),
                "mode": beat.get("mode"),
                "model": beat.get("model"),
                "iteration": beat.get("iteration", 0),
                "max_iterations": beat.get("max_iterations", 0),
                "elapsed_s": round(now - run["started_at"]),
                "cost_usd": beat.get("cost_usd", 0.0),
                "tool": beat.get("tool"),
                "finding": beat.get("finding"),
                "heartbeat_age_s": round(now - beat["updated_at"]) if beat else None,
            }
        )
    return found
