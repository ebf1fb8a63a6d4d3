"""`worker serve`: the batch cycle in a loop, with health signals, until SIGTERM/SIGINT."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from worker import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for

if TYPE_CHECKING:
    from worker.daemon.serve import Cycle


def serve_command(
    workspace: WorkspaceOpt = Path("."),
    interval: Annotated[
        float | None,
        typer.Option("--interval", min=0.001, help="Seconds between runs (daemon.interval_s)."),
    ] = None,
    max_cycles: Annotated[
        int | None, typer.Option("--max-cycles", min=1, help="Stop after this many runs.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the batch cycle continuously: one run, then sleep until the interval ends or a
    message arrives. SIGTERM/SIGINT stop the running agent, keep its work, release the task."""
    settings = settings_for(workspace)
    if interval is not None:
        daemon = settings.daemon.model_copy(update={"interval_s": interval})
        settings = settings.model_copy(update={"daemon": daemon})
    from worker.daemon.serve import serve

    report = serve(settings, max_cycles=max_cycles, on_cycle=None if as_json else _print_cycle)
    data = {
        "cycles": report.cycles,
        "exit_code": report.exit_code,
        "stopped_by": report.stopped_by,
        "last": [vars(cycle) for cycle in report.last],
    }
    ui.emit(
        data, as_json, lambda d: ui.line(f"stopped after {d['cycles']} run(s): {d['stopped_by']}")
    )
    raise typer.Exit(report.exit_code)


def _print_cycle(cycle: Cycle) -> None:
    detail = f" ({cycle.detail})" if cycle.detail else ""
    ui.line(f"run {cycle.number}: {cycle.outcome}{detail}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the main app."""
    app.command("serve")(serve_command)
