"""`worker log`: recent runs with their titles, decisions and outcome codes; `-f` follows."""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for
from worker.errors import UsageError

if TYPE_CHECKING:
    from worker.config import Settings

_COLUMNS = [
    "run",
    "started",
    "task",
    "title",
    "source",
    "outcome",
    "outcome codes",
    "why",
    "decision",
    "iterations",
    "cost",
]


def log_command(
    workspace: WorkspaceOpt = Path("."),
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many.")] = 20,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing runs as they happen (Ctrl-C).")
    ] = False,
    as_json: JsonOpt = False,
    fleet: Annotated[
        bool, typer.Option("--fleet", help="Every machine's runs, from the fleet database.")
    ] = False,
) -> None:
    """List recent runs: task and title, outcome and its codes (e.g. AGENT_NOT_FOUND), what
    ended it in words, the decision's reason codes, iterations and cost."""
    from worker.state.run_log import follow as follow_runs
    from worker.state.run_log import log_rows
    from worker.state.store import Store

    settings = settings_for(workspace, lenient=True)
    if fleet:
        _fleet_log(settings, limit, as_json)
        return
    if follow:
        for row in follow_runs(settings, limit, threading.Event()):
            if as_json:
                ui.print_jsonl(row)
            else:
                ui.line(_follow_line(row))
        return
    rows: list[dict[str, Any]] = []
    decisions: list[dict[str, Any]] = []
    if settings.db_path.exists():
        with Store(settings.db_path) as store:
            rows, decisions = log_rows(store, limit), store.recent_decisions(limit)
    if as_json:
        ui.print_json({"runs": rows, "decisions": decisions})
        return
    if not rows:
        ui.line("no runs yet")
        return
    ui.table([_cells(row) for row in rows], _COLUMNS)


def _cells(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "run": row["run"],
        "started": _when(row["started_at"]),
        "task": row["task"],
        "title": row["title"],
        "source": row["source"],
        "outcome": row["outcome"],
        "outcome codes": row["outcome_codes"] or None,
        # What ended the run, in words: the agent's reason, a bad key, a missing CLI.
        "why": row["reason"] or None,
        "decision": row["decision_codes"] or None,
        "iterations": row["iterations"],
        "cost": f"${row['cost_usd']:.4f}",
    }


def _follow_line(row: dict[str, Any]) -> str:
    """One line stamped with the moment it tells of: the run's start, a line of its journal
    (a tool call, a STATUS block, ...) or its end."""
    head = f"{_when(row['at'])} run {row['run']}"
    if "event" in row:
        return f"{head} {row['task'] or ''}: {row['event']}"
    task = f" {row['task']}" + (f" ({row['title']})" if row["title"] else "") if row["task"] else ""
    if row["ended_at"] is None:
        beat = row.get("progress") or {}
        doing = (
            f": iteration {beat['iteration']}/{beat['max_iterations']}"
            + (f", {beat['tool']}" if beat.get("tool") else "")
            if beat
            else ": started"
        )
        return f"{head}{task}{doing}"
    codes = ", ".join(row["outcome_codes"] or row["decision_codes"])
    return (
        f"{head}{task}: {row['outcome']} ({codes}) after {row['iterations']} iteration(s),"
        f" ${row['cost_usd']:.4f}"
    )


def _fleet_log(settings: Settings, limit: int, as_json: bool) -> None:
    from worker.fleet.view import fleet_log

    if not settings.fleet.enabled:
        raise UsageError("--fleet needs [fleet] database_url (or WORKER_FLEET__DATABASE_URL)")
    ui.emit(fleet_log(settings, limit), as_json, _render_fleet)


def _render_fleet(data: dict[str, Any]) -> None:
    rows = [
        {
            "run": run["id"],
            "machine": run["machine_id"],
            "started": _when(run["started_at"]),
            "task": run["task_id"],
            "outcome": run["outcome"] or "running",
            "modes": run["modes"],
            "cost": run["cost_usd"],
            "reasons": run["reason_codes"],
        }
        for run in data["runs"]
    ]
    if not rows:
        ui.line(f"no runs yet in {data['database']}")
        return
    ui.table(rows, ["run", "machine", "started", "task", "outcome", "modes", "cost", "reasons"])


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def register(app: typer.Typer) -> None:
    app.command("log")(log_command)
