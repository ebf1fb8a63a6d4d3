"""`worker status`: at a glance, the waiting tasks and the last run."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from worker import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for
from worker.humanize import duration


def status_command(workspace: WorkspaceOpt = Path("."), as_json: JsonOpt = False) -> None:
    """Show the waiting tasks (what each waits for, since when) and the last run."""
    from worker.waits.service import status

    ui.emit(status(settings_for(workspace)), as_json, _render)


def _render(data: dict[str, Any]) -> None:
    state = data["state"]
    ui.line(f"state: {state['state_dir']}")
    ui.line(f"inbox: {state['inbox_dir']}")
    for key in state["in_workspace"]:
        ui.warn(f"{key} lies inside the workspace: the agent can write there")
    if state["legacy_state"]:
        ui.warn(f"old state folder {state['legacy_state']}: the next run moves it")
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
