"""`worker costs`: what the agents cost, grouped, with the reviewers apart."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for


def costs_command(
    by: Annotated[
        str, typer.Option("--by", help="Group by day (UTC), mode, source or machine.")
    ] = "day",
    since: Annotated[
        str | None,
        typer.Option("--since", help="From this date (2026-11-01), `today` or `7d`; default: all."),
    ] = None,
    workspace: WorkspaceOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Report the recorded spend: the tasks' agent calls, and the reviewers' apart."""
    from worker.run.costs import parse_since, report

    data = report(settings_for(workspace, lenient=True), by, parse_since(since)).to_json()
    ui.emit(data, as_json, _render)


def _render(data: dict[str, Any]) -> None:
    since = f" since {data['since'][:16].replace('T', ' ')}" if data["since"] else ""
    ui.line(f"tasks: ${data['total_tasks_usd']:.4f}{since}")
    if data["tasks"]:
        ui.table(_cells(data["tasks"], data["by"]), [data["by"], "runs", "calls", "usd"])
    ui.line(f"reviewers: ${data['total_reviewers_usd']:.4f}{since}")
    if data["reviewers"]:
        key = data["by"] if data["by"] in ("day", "machine") else "reviewer"
        ui.table(_cells(data["reviewers"], key), [key, "calls", "usd"])


def _cells(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return [{**row, key: row["key"], "usd": f"${row['usd']:.4f}"} for row in rows]


def register(app: typer.Typer) -> None:
    app.command("costs")(costs_command)
