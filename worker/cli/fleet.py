"""`worker fleet`: every machine's status report side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for
from worker.humanize import duration


def fleet_command(
    workspace: WorkspaceOpt = Path("."),
    reports: Annotated[
        Path | None,
        typer.Option("--reports", file_okay=False, help="The reports folder (default: settings)."),
    ] = None,
    stale_after: Annotated[
        float | None,
        typer.Option("--stale-after", min=1, help="Seconds after which a report is stale."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show each machine's health, task, mode, PACE and context fill; flag stale reports."""
    from worker.supervision.factory import reports_folder, stale_after_s
    from worker.supervision.fleet import fleet_view
    from worker.supervision.reports import now_utc

    settings = settings_for(workspace)
    if settings.fleet.enabled and reports is None:  # every machine, from the fleet database
        from worker.fleet.view import fleet_view as fleet_db_view

        view = fleet_db_view(settings, stale_after or stale_after_s(settings))
    else:
        folder = reports if reports is not None else reports_folder(settings)
        view = fleet_view(folder, stale_after or stale_after_s(settings), now_utc())
    ui.emit(view.to_dict(), as_json, _render)


def _render(data: dict[str, Any]) -> None:
    rows = []
    for row in data["rows"]:
        if row["error"]:
            rows.append(
                {
                    "machine": row["machine"],
                    "health": "unreadable",
                    "task": f"{row['file']}: {row['error']}",
                }
            )
            continue
        fill = row["context_fill"]
        rows.append(
            {
                **row,
                "context": None if fill is None else f"{fill:.0%}",
                "age": duration(row["age_s"]) + (" STALE" if row["stale"] else ""),
                "last anomaly": row["anomalies"][-1] if row["anomalies"] else None,
            }
        )
    if not rows:
        ui.line(f"no status reports in {data['folder']}")
        return
    ui.table(
        rows,
        [
            "machine",
            "health",
            "state",
            "task",
            "mode",
            "iteration",
            "pace",
            "context",
            "cost_usd",
            "age",
            "last anomaly",
        ],
        title=f"fleet ({data['folder']})",
    )
    if data["stale"]:
        ui.line(
            f"stale (no report for over {data['stale_after_s']:.0f}s): " + ", ".join(data["stale"])
        )
    if data["malformed"]:
        ui.line("unreadable reports: " + ", ".join(data["malformed"]))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the main app."""
    app.command("fleet")(fleet_command)
