"""The services behind `worker log` (runs with titles and outcome codes, followed live) and
`worker show RUN` (each iteration: its STATUS line, cost, tools used, files written)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

from worker.config import Settings
from worker.errors import UsageError
from worker.lazyimport import lazy
from worker.progress import progress_of, tools_of
from worker.store import Store

_process = lazy("worker.platform.process")  # psutil, only for a run with no end


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
# (worker/dead_runs.py), meanwhile `worker log` agrees with `worker status` (nothing runs).
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
    it ends, and its progress (iteration, tool) whenever that changes. Ends when `stop` is set.
    """
    seen: dict[int, tuple[Any, ...]] = {}
    while not stop.is_set():
        if settings.db_path.exists():
            with Store(settings.db_path) as store:
                rows = log_rows(store, limit)
                live = progress_of(store, [r["run"] for r in rows if r["ended_at"] is None])
            for row in reversed(rows):
                beat = live.get(row["run"]) or {}
                row["progress"] = beat or None
                key = (row["ended_at"], beat.get("iteration"), beat.get("tool"), row["task"])
                if seen.get(row["run"]) != key:
                    seen[row["run"]] = key
                    yield row
        stop.wait(poll_s)


def run_detail(settings: Settings, run_id: int) -> dict[str, Any]:
    if not settings.db_path.exists():
        raise UsageError(f"no runs yet in {settings.workspace}; `worker run` records them")
    with Store(settings.db_path) as store:
        found = runs_where(store, "id = ?", (run_id,))
        if not found:
            raise UsageError(f"no run {run_id}; `worker log` lists the runs")
        tools = tools_of(store, run_id)
        iterations = []
        for it in store.iterations_of(run_id):
            extra = tools.get(it["seq"], {"tools": {}, "files": []})
            iterations.append({**it, **extra})
        described = describe(store, found)[0]
    return {"run": described, "iterations": iterations}
