"""`worker queue`: what the next runs would take, in order, and why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for


def queue_command(workspace: WorkspaceOpt = Path("."), as_json: JsonOpt = False) -> None:
    """List the queued tasks of every source in the order runs would take them, with why each
    would or would not be taken next. Nothing is claimed or moved."""
    from worker.operator.queue_plan import queue

    rows = [row.to_json() for row in queue(settings_for(workspace, lenient=True))]
    ui.emit({"queue": rows}, as_json, _render)


def _render(data: dict[str, Any]) -> None:
    rows = data["queue"]
    if not rows:
        ui.line("the queue is empty: the next run would do nothing")
        return
    for row in rows:
        row["#"] = row["position"] or "-"
    ui.table(rows, ["#", "task_id", "source", "title", "why"])


def register(app: typer.Typer) -> None:
    app.command("queue")(queue_command)
