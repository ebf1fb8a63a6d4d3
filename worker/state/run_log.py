"""The services behind `worker log` (runs with titles and outcome codes, followed live) and
`worker show RUN` (each iteration: its STATUS line, cost, tools used, files written)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

from worker.config import Settings
from worker.errors import UsageError
from worker.process.lazyimport import lazy
from worker.sandbox.record import sandboxes_of
from worker.state.progress import events_after, last_event_id, progress_of, tools_of
from worker.state.store import Store

_process = lazy("worker.process.platform.process")  # psutil, only for a run with no end


def log_rows(store: Store, limit: int) -> list[dict[str, Any]]:
    """The latest runs, newest first: what was decided, and what came of it (outcome codes:
    the run's codes the decision did not already give)."""
    return describe(store, store.recent_runs(limit))


def runs_where(
    store: Store, where: str, params: tuple[Any, ...], limit: int = 20
) -> list[dict[str, Any]]:
    """Runs matching an SQL condition (written here, never from input), newest first."""
    rows = store.db.execute(
        f"SELECT * FROM runs WHERE {where} ORDER BY id DESC LIMIT ?", (*params, limit)
    )
    found = []
    for row in rows:
        run = dict(row)
        for key in ("modes", "reason_codes"):
            run[key] = json.loads(run[key] or "[]")
        found.append(run)
    return found


def describe(store: Store, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    titles = progress_of(store, [r["id"] for r in runs])
    rows = []
    for run in runs:
        decision = store.decision_for_run(run["id"]) or {}
        decided = list(decision.get("reason_codes") or [])
        outcome_codes = [c for c in dict.fromkeys(run["reason_codes"] or []) if c not in decided]
        rows.append(
            {
                "run": run["id"],
                "started_at": run["started_at"],
                "ended_at": run["ended_at"],
                "machine": run["machine_id"],
                "task": run["task_id"],
                "title": (titles.get(run["id"]) or {}).get("title"),
                "source": run["source"],
                "outcome": run["outcome"] or _open(run),
                "outcome_codes": outcome_codes,
                "reason": run["reason"] or _died_reason(run),
                "modes": run["modes"],
                "iterations": run["iterations"],
                "cost_usd": run["cost_usd"],
                "duration_s": run["duration_s"],
                "decision_codes": decided,
            }
        )
    return rows


# A run still open whose process is gone: it died (killed); the next `worker run` closes its record
# (worker/state/dead_runs.py), meanwhile `worker log` agrees with `worker status` (nothing runs).
_DIED_OPEN = "its process (pid {pid}) is gone; the next run closes this record"


def _open(run: dict[str, Any]) -> str | None:
    """`running` or `died` for a run with no end, None for an ended one."""
    if run["ended_at"] is not None:
        return None
    return "running" if _process.alive(int(run["pid"])) else "died"


def _died_reason(run: dict[str, Any]) -> str | None:
    return _DIED_OPEN.format(**run) if _open(run) == "died" else None


def follow(
    settings: Settings, limit: int, stop: threading.Event, poll_s: float = 1.0
) -> Iterator[dict[str, Any]]:
    """Runs as they happen: each run once when it starts (or is first seen) and once when
    it ends, and between them each line of its journal (an iteration's start and end, a tool
    call, a STATUS block, a supervisor finding) once, with the time it happened (`at`; a
    journal line has `event` too). Lines are in the order they happened. Ends when `stop` is
    set."""
    seen: dict[int, tuple[Any, ...]] = {}
    after: int | None = None  # the journal's last line shown; None: from the start of -f
    while not stop.is_set():
        if not settings.db_path.exists():
            after = 0  # nothing has happened yet: every line to come is shown
        else:
            with Store(settings.db_path) as store:
                rows = log_rows(store, limit)
                live = progress_of(store, [r["run"] for r in rows if r["ended_at"] is None])
                if after is None:
                    after = last_event_id(store)  # what happened before -f is `worker show`'s
                events = events_after(store, after)
            after = events[-1]["id"] if events else after
            yield from sorted(_changed(rows, live, seen) + _lines(events, rows, live), key=_at)
        stop.wait(poll_s)


def _changed(
    rows: list[dict[str, Any]], live: dict[int, dict[str, Any]], seen: dict[int, tuple[Any, ...]]
) -> list[dict[str, Any]]:
    """The runs first seen, or ended, since the last look."""
    changed = []
    for row in reversed(rows):
        row["progress"] = live.get(row["run"]) or None
        key = (row["ended_at"], row["task"])
        if seen.get(row["run"]) != key:
            seen[row["run"]] = key
            row["at"] = row["ended_at"] or row["started_at"]
            changed.append(row)
    return changed


def _lines(
    events: list[dict[str, Any]], rows: list[dict[str, Any]], live: dict[int, dict[str, Any]]
) -> list[dict[str, Any]]:
    runs = {row["run"]: row for row in rows}
    out = []
    for event in events:
        # A running run's task is in its heartbeat until the run records it.
        run = {**(live.get(event["run_id"]) or {}), **(runs.get(event["run_id"]) or {})}
        out.append(
            {
                "run": event["run_id"],
                "task": run.get("task") or run.get("task_id"),
                "title": run.get("title"),
                "outcome": "running",
                "at": event["at"],
                "event": event["text"],
            }
        )
    return out


def _at(row: dict[str, Any]) -> tuple[float, int]:
    """In time order; at the same moment a run's start, then its lines, then its end."""
    rank = 1 if "event" in row else 2 if row.get("ended_at") else 0
    return float(row["at"]), rank


def run_detail(settings: Settings, run: int | str) -> dict[str, Any]:
    """One run, iteration by iteration: `run` is its number, or a task id (its latest run)."""
    if not settings.db_path.exists():
        raise UsageError(f"no runs yet in {settings.workspace}; `worker run` records them")
    with Store(settings.db_path) as store:
        found = _find_run(store, run)
        run_id = found[0]["id"]
        tools = tools_of(store, run_id)
        boxes = sandboxes_of(store, run_id)
        iterations = []
        for it in store.iterations_of(run_id):
            extra = tools.get(it["seq"], {"tools": {}, "files": []})
            runtime, refused = boxes.get(it["seq"], (None, []))
            iterations.append({**it, **extra, "sandbox": runtime, "sandbox_refused": refused})
        described = describe(store, found)[0]
    return {"run": described, "iterations": iterations}


def _find_run(store: Store, run: int | str) -> list[dict[str, Any]]:
    text = str(run).strip()
    if text.isdigit():
        found = runs_where(store, "id = ?", (int(text),), limit=1)
        if not found:
            raise UsageError(f"no run {text}; `worker log` lists the runs")
        return found
    found = runs_where(store, "task_id = ?", (text,), limit=1)
    if not found:
        raise UsageError(
            f"no run of task {text!r}; give a run number or a task id that `worker log` lists"
        )
    return found
