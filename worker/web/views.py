"""What each dashboard page shows, read through the services the commands use (`worker
status`, `fleet`, `queue`, `log`, `show`, `costs`), with every text passed through the
project's redaction before it is rendered."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from worker.config import Settings
from worker.errors import MalformedInput, UsageError
from worker.fleet.view import fleet_log
from worker.fleet.view import fleet_view as db_view
from worker.humanize import CONDITION_WORDS
from worker.operator.queue_plan import queue as plan
from worker.operator.status import status as operator_status
from worker.process.proc import output_redactor
from worker.run.costs import report as cost_report
from worker.state.progress import progress_of, tool_summary
from worker.state.run_log import describe, run_detail, runs_where
from worker.state.store import Store
from worker.supervision.factory import reports_folder, stale_after_s
from worker.supervision.fleet import fleet_view as folder_view
from worker.supervision.formats import read_file
from worker.supervision.reports import now_utc

log = logging.getLogger(__name__)

PAGE = 50  # runs per history page
_EVENTS = 300  # transcript events shown per iteration
_TEXT = 2000  # characters of one transcript event
_SPEND_DAYS = 30
_KEY_VALUE = re.compile(r"(?i)\b([\w.-]*(?:token|secret|password|api_?key)[\w.-]*)=\S+")


def scrubber(extra: tuple[str, ...] = ()) -> Callable[[Any], Any]:
    """A function that hides secrets in every string of a JSON-like value: the values of the
    secrets in the environment, token shapes (as the logs), `name=value` secrets, and `extra`
    (the dashboard's own token)."""
    hide = output_redactor()

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            for secret in extra:
                value = value.replace(secret, "***")
            return _KEY_VALUE.sub(lambda m: f"{m.group(1)}=***", hide(value))
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [scrub(v) for v in value]
        return value

    return scrub


def overview(settings: Settings) -> dict[str, Any]:
    """The front page: machines, the running task(s), the waits, today's spend."""
    data = operator_status(settings, with_queue=False)
    waits = [
        {
            **w,
            "what": CONDITION_WORDS.get(w["resume_when"], w["resume_when"]),
            # only a wait for a user's approval is approved or rejected (`worker waits`)
            "approvable": w["resume_when"].split(":", 1)[0].strip().lower() == "user_approval",
        }
        for w in data["waiting"]
    ]
    return {
        "machine_id": settings.machine_id,
        "fleet": settings.fleet.enabled,
        "machines": machines(settings, data["running"]),
        "running": data["running"],
        "waits": waits,
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
    """Recent runs, newest first, a page at a time (`before`: the oldest run id shown)."""
    if settings.fleet.enabled:
        return {"runs": [], "fleet_runs": fleet_log(settings, PAGE)["runs"], "older": None}
    runs: list[dict[str, Any]] = []
    found: list[dict[str, Any]] = []
    if settings.db_path.exists():
        with Store(settings.db_path) as store:
            found = runs_where(store, "id < ?", (before or 2**62,), limit=PAGE + 1)
            runs = describe(store, found[:PAGE])
    older = runs[-1]["run"] if len(runs) == PAGE and len(found) > PAGE else None
    return {"runs": runs, "fleet_runs": None, "older": older}


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
