"""`worker log`: recent decisions and runs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from worker import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for
from worker.errors import UsageError

if TYPE_CHECKING:
    from worker.config import Settings


def log_command(
    workspace: WorkspaceOpt = Path("."),
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many.")] = 20,
    as_json: JsonOpt = False,
    fleet: Annotated[
        bool, typer.Option("--fleet", help="Every machine's runs, from the fleet database.")
    ] = False,
) -> None:
    """List recent runs with their decisions (task, source, mode, reason codes)."""
    from worker.store import Store

    settings = settings_for(workspace)
    if fleet:
        _fleet_log(settings, limit, as_json)
        return
    if not settings.db_path.exists():
        runs, decisions = [], []
    else:
        with Store(settings.db_path) as store:
            runs, decisions = store.recent_runs(limit), store.recent_decisions(limit)
    if as_json:
        ui.print_json({"runs": runs, "decisions": decisions})
        return
    by_run = {d["run_id"]: d for d in decisions}
    rows = []
    for run in runs:
        decision = by_run.get(run["id"], {})
        rows.append(
            {
                "run": run["id"],
                "started": _when(run["started_at"]),
                "task": run["task_id"],
                "source": run["source"],
                "outcome": run["outcome"] or "running",
                "modes": run["modes"],
                "iterations": run["iterations"],
                "cost": run["cost_usd"],
                "reasons": decision.get("reason_codes"),
                # What ended the run, in words: the agent's reason, a bad key, a missing CLI.
                "why": (run["reason"] or "")[:120] or None,
            }
        )
    if not rows:
        ui.line("no runs yet")
        return
    ui.table(
        rows,
        [
            "run",
            "started",
            "task",
            "source",
            "outcome",
            "modes",
            "iterations",
            "cost",
            "reasons",
            "why",
        ],
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
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def register(app: typer.Typer) -> None:
    app.command("log")(log_command)
