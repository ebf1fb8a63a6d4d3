"""What each dashboard page shows, read through the services the commands use (`worker
status`, `fleet`, `queue`, `log`, `show`, `costs`), with every text passed through the
project's redaction before it is rendered."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from worker import secrets
from worker.config import Settings
from worker.errors import MalformedInput, UsageError
from worker.fleet.view import fleet_log
from worker.fleet.view import fleet_view as db_view
from worker.operator.queue_plan import queue as plan
from worker.operator.status import status as operator_status
from worker.run.costs import report as cost_report
from worker.state.progress import progress_of, tool_summary
from worker.state.run_log import describe, run_detail, runs_where
from worker.state.store import Store
from worker.supervision.factory import reports_folder, stale_after_s
from worker.supervision.fleet import fleet_view as folder_view
from worker.supervision.formats import read_file
from worker.supervision.reports import now_utc
from worker.web.wait_kinds import grouped

log = logging.getLogger(__name__)

PAGE = 50  # runs per history page
_EVENTS = 300  # transcript events shown per iteration
_TEXT = 2000  # characters of one transcript event
_SPEND_DAYS = 30


def scrubber(extra: tuple[str, ...] = ()) -> Callable[[Any], Any]:
    """A function that hides secrets in every string of a JSON-like value: the values of the
    secrets in the environment, token shapes (as the logs), `name=value` secrets, and `extra`
    (the dashboard's own token)."""
    hide = secrets.masker(extra=extra, key_value=True)
    return lambda value: secrets.mask_all(value, hide)


def overview(settings: Settings) -> dict[str, Any]:
    """The front page: machines, the running task(s), the waits, today's spend."""
    data = operator_status(settings, with_queue=False)
    groups = grouped(data["waiting"], data["running"])
    return {
        "machine_id": settings.machine_id,
        "fleet": settings.fleet.enabled,
        "machines": machines(settings, data["running"]),
        "running": data["running"],
        "wait_groups": groups,
        "waits": [wait for group in groups for wait in group["waits"]],
        "failures": data["failures"],
        "spent_today_usd": data["spent_today_usd"],
        "daily_cost_cap_usd": data["daily_cost_cap_usd"],
    }


def machines(settings: Settings, running: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each machine with its state and when it was last heard: the fleet database's view with
    a fleet (as `worker fleet`), else the reports folder's, and this machine's heartbeat."""
    stale = stale_after_s(settings)
    rows: list[dict[str, Any]] = []
    try:
        if settings.fleet.enabled:
            rows = db_view(settings, stale).to_dict()["rows"]
        else:
            rows = folder_view(reports_folder(settings), stale, now_utc()).to_dict()["rows"]
    except Exception as exc:  # an unreachable database is shown, not fatal to the page
        log.debug("dashboard: machines not read", exc_info=True)
        rows = [
            {"machine": "?", "error": str(exc), "state": "unknown", "stale": True, "age_s": None}
        ]
    own = [r for r in running if r["machine"] == settings.machine_id]
    here = next((r for r in rows if r.get("machine") == settings.machine_id), None)
    if here is None:
        here = {"machine": settings.machine_id, "health": None, "stale": False, "error": None}
        rows.insert(0, here)
    if own:
        tasks = ", ".join(str(r["task_id"] or "(choosing a task)") for r in own)  # each slot's
        here.update(state="running", task=tasks, age_s=own[0]["heartbeat_age_s"])
    elif "state" not in here:
        here.update(state="idle", age_s=None)
    return rows


def history(settings: Settings, before: int | None = None) -> dict[str, Any]:
    """Recent runs that did something, newest first, a page at a time (`before`: the oldest
    run id shown), each with its own cost; the idle runs (one per cron tick) as a count per
    day."""
    if settings.fleet.enabled:
        fleet = fleet_log(settings, PAGE)["runs"]
        return {"runs": [], "fleet_runs": fleet, "older": None, "idle_days": []}
    runs: list[dict[str, Any]] = []
    found: list[dict[str, Any]] = []
    idle: list[dict[str, Any]] = []
    if settings.db_path.exists():
        with Store(settings.db_path) as store:
            worked = "id < ? AND COALESCE(outcome, '') != 'idle'"
            found = runs_where(store, worked, (before or 2**62,), limit=PAGE + 1)
            runs = describe(store, found[:PAGE])
            _own_costs(store, runs)
            idle = _idle_days(store)
    older = runs[-1]["run"] if len(runs) == PAGE and len(found) > PAGE else None
    return {"runs": runs, "fleet_runs": None, "older": older, "idle_days": idle}


def _own_costs(store: Store, runs: list[dict[str, Any]]) -> None:
    """Each run's own spend (its iterations), beside the task's total so far (`cost_usd`: a
    resumed task's runs carry what the earlier ones spent)."""
    ids = [run["run"] for run in runs]
    marks = ", ".join("?" * len(ids))
    own = dict(
        store.db.execute(
            f"SELECT run_id, SUM(cost_usd) FROM iterations WHERE run_id IN ({marks})"
            " GROUP BY run_id",
            ids,
        ).fetchall()
    )
    for run in runs:
        run["run_cost_usd"] = float(own.get(run["run"]) or 0.0)


def _idle_days(store: Store) -> list[dict[str, Any]]:
    """Idle runs per UTC day, the last `_SPEND_DAYS` days with any, newest first."""
    rows = store.db.execute(
        "SELECT date(started_at, 'unixepoch') AS day, COUNT(*) AS runs FROM runs"
        " WHERE outcome = 'idle' GROUP BY day ORDER BY day DESC LIMIT ?",
        (_SPEND_DAYS,),
    )
    return [{"day": row["day"], "runs": row["runs"]} for row in rows]


def run_page(settings: Settings, run_id: int) -> dict[str, Any]:
    """One run as `worker show` gives it, with the supervisor's last finding and the
    transcript of each iteration."""
    data = run_detail(settings, run_id)
    with Store(settings.db_path) as store:
        beat = progress_of(store, [run_id]).get(run_id) or {}
    data["finding"] = beat.get("finding")
    folder = settings.logs / f"run-{run_id}"
    for it in data["iterations"]:
        it["transcript"] = transcript(folder / f"iteration-{it['seq']}.jsonl")
    return data


def transcript(path: Path) -> list[dict[str, Any]]:
    """The agent's events in one iteration's log, in words; empty when there is no log."""
    if not path.is_file():
        return []
    shown: list[dict[str, Any]] = []
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            _fmt, events = read_file(handle)
            for event in events:
                entry = _event_line(event)
                if entry is not None:
                    shown.append(entry)
                if len(shown) >= _EVENTS:
                    shown.append({"kind": "cut", "text": f"(only the first {_EVENTS} shown)"})
                    break
    except (MalformedInput, OSError, ValueError) as exc:
        return [{"kind": "error", "text": f"transcript not readable: {exc}"}]
    return shown


def _event_line(event: Any) -> dict[str, Any] | None:
    kind = str(event.kind)
    if kind == "text" and event.text:
        return {"kind": "text", "text": event.text[:_TEXT]}
    if kind == "tool_call":
        return {"kind": "tool", "text": tool_summary(event, width=200)}
    if kind == "tool_result":
        text = (event.text or event.error or "")[:_TEXT]
        return {"kind": "error" if event.is_error else "result", "text": text}
    if kind == "error":
        return {"kind": "error", "text": (event.error or event.text or "")[:_TEXT]}
    return None


def spend(settings: Settings) -> dict[str, Any]:
    """The last 30 days' spend by day and by mode (as `worker costs`), and the daily cap."""
    since = now_utc() - timedelta(days=_SPEND_DAYS)
    by_day = cost_report(settings, "day", since).to_json()
    by_mode = cost_report(settings, "mode", since).to_json()
    return {
        "since": by_day["since"],
        "days": by_day["tasks"],
        "modes": by_mode["tasks"],
        "reviewers_usd": by_day["total_reviewers_usd"],
        "total_usd": by_day["total_tasks_usd"],
        "cap": settings.daily_cost_cap_usd,
    }


def queue(settings: Settings) -> dict[str, Any]:
    """The queue as `worker queue` lists it; a source that cannot be read is named."""
    try:
        return {"rows": [row.to_json() for row in plan(settings)], "error": None}
    except UsageError:
        raise
    except Exception as exc:
        log.debug("dashboard: queue not read", exc_info=True)
        return {"rows": [], "error": str(exc)}
