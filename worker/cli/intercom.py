"""`worker intercom send TASK TEXT`: a local message for a task."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for

app = typer.Typer(
    help="Local messages for tasks (`intercom_message`), and orders: /stop, /pause, /resume.",
    no_args_is_help=True,
)


@app.command("send")
def send(
    task: Annotated[str, typer.Argument(help="The task id or its wait-state file name.")],
    text: Annotated[str, typer.Argument(help="The message, handed to the agent as data.")],
    force: Annotated[
        bool, typer.Option("--force", help="Leave the message even for a task not seen yet.")
    ] = False,
    workspace: WorkspaceOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Leave a message for a task; a task waiting for `intercom_message` resumes with it.

    A message starting with /stop, /cancel, /pause or /resume is an order for the task instead
    (the running worker obeys it within a second or two, or the next run does)."""
    from worker.state.known_tasks import require_known
    from worker.waits.service import note

    settings = settings_for(workspace)
    require_known(settings, task, force=force)
    data = note(settings, task, "message", text)
    ui.emit(data, as_json, _render)


def _render(data: dict[str, Any]) -> None:
    what = f"{data['order']} order" if data.get("order") else "message"
    ui.line(f"{what} for {data['task_id']} written: {data['note']}")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="intercom")
