"""`worker submit TITLE`: give worker a task without writing inbox JSON by hand."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for


def submit_command(
    title: Annotated[str, typer.Argument(help="What to do, in one line (the task's title).")],
    body: Annotated[
        str | None,
        typer.Option("--body", "-b", help="The task's details; `-` reads them from stdin."),
    ] = None,
    to: Annotated[
        str | None, typer.Option("--to", help="The machine to do it (default: this one; all).")
    ] = None,
    priority: Annotated[
        str, typer.Option("--priority", "-p", help="0 (first) to 9, or urgent/high/normal/low.")
    ] = "normal",
    mode: Annotated[
        str | None, typer.Option("--mode", "-m", help="Run it in this mode (default: detected).")
    ] = None,
    reply_to: Annotated[
        str | None,
        typer.Option("--reply-to", help="Answer this waiting task instead of starting a new one."),
    ] = None,
    workspace: WorkspaceOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Put a task into the inbox (a validated message, written atomically); print its id."""
    from worker.operator.submit import submit

    text = sys.stdin.read() if body == "-" else (body or "")
    done = submit(
        settings_for(workspace),
        title=title,
        body=text,
        to=to,
        priority=priority,
        mode=mode,
        reply_to=reply_to,
    )
    ui.emit(done.to_json(), as_json, _render)


def _render(data: dict[str, Any]) -> None:
    ui.line(data["id"])


def register(app: typer.Typer) -> None:
    app.command("submit")(submit_command)
