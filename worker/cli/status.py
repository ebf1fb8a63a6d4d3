"""`worker status`: at a glance, the waiting tasks and the last run."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from worker import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for
from worker.errors import UsageError
from worker.humanize import duration


def status_command(
    workspace: WorkspaceOpt = Path("."),
    as_json: JsonOpt = False,
    fleet: Annotated[
        bool, typer.Option("--fleet", help="Every machine, from the fleet database.")
    ] = False,
) -> None:
    """Show the waiting tasks (what each waits for, since when) and the last run."""
    from worker.waits.service import status

    settings = settings_for(workspace)
    if fleet:
        from worker.fleet.view import fleet_status

        if not settings.fleet.enabled:
            raise UsageError("--fleet needs [fleet] database_url (or WORKER_FLEET__DATABASE_URL)")
        ui.emit(fleet_status(settings), as_json, _render_fleet)
        return
    ui.emit(status(settings), as_json, _render)


def _render_fleet(data: dict[str, Any]) -> None:
    rows = [
        {
            "machine": m["machine"],
            "running": ", ".join(m["running"]) or "-",
            "waiting": ", ".join(m["waiting"]) or "-",
            "last run": _last(m.get("last_run")),
        }
        for m in data["machines"]
    ]
    if not rows:
        ui.line(f"no machines in {data['database']} yet")
        return
    ui.table(rows, ["machine", "running", "waiting", "last run"], title=data["database"])


def _last(run: dict[str, Any] | None) -> str:
    if not run:
        return "-"
    parts = [f"#{run['id']}", run["outcome"] or "running", run["task_id"]]
    return " ".join(part for part in parts if part) + f", {duration(run['age'])} ago"


def _render(data: dict[str, Any]) -> None:
    last = data["last_run"]
    if last:
        when = datetime.fromtimestamp(last["started_at"], UTC).strftime("%Y-%m-%d %H:%M")
        ui.line(
            f"last run: #{last['id']} at {when} UTC: {last['outcome'] or 'running'} "
            f"{last['task_id'] or ''}".rstrip()
        )
    else:
        ui.line("last run: none yet")
    waiting = data["waiting"]
    if not waiting:
        ui.line("waiting: none")
    else:
        ui.line(f"waiting: {len(waiting)}")
        rows = [
            {
                "task": w["task_id"],
                "waits for": w["wait_for"] or w["resume_when"],
                "condition": w["resume_when"],
                "since": w["since"][:19].replace("T", " "),
                "for": duration(w["waiting_s"]),
                "ready": "yes" if w["ready"] else "no",
            }
            for w in waiting
        ]
        ui.table(rows, ["task", "condition", "waits for", "since", "for", "ready"])
    if data["quarantined"]:
        ui.warn(f"{data['quarantined']} unreadable wait-state file(s) set aside")


def register(app: typer.Typer) -> None:
    app.command("status")(status_command)
