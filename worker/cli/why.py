"""`worker why [RUN]`: a run's decision explained in words, from its decision event."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for


def why(
    run: Annotated[int | None, typer.Argument(help="The run id (default: the latest).")] = None,
    workspace: WorkspaceOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Explain why a run did what it did: the chosen flow, its class, the orders obeyed."""
    from worker.kernel.why import explain_run

    answer = explain_run(settings_for(workspace, lenient=True), run)
    ui.emit(answer, as_json, _render)


def _render(data: dict[str, Any]) -> None:
    for line in data["explanation"]:
        ui.line(line)


def register(app: typer.Typer) -> None:
    app.command("why")(why)
