"""`worker prune [--dry-run]`: delete the history past its retention now."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for

DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Count what would be deleted; delete nothing.")
]


def prune_command(
    workspace: WorkspaceOpt = Path("."), dry_run: DryRunOpt = False, as_json: JsonOpt = False
) -> None:
    """Delete runs, decisions, ended claims, run logs and CLI folders past [retention]."""
    from worker.state.retention import prune_workspace

    ui.emit(prune_workspace(settings_for(workspace), dry_run=dry_run).to_dict(), as_json, _render)


def _render(data: dict[str, Any]) -> None:
    verb = "would delete" if data["dry_run"] else "deleted"
    ui.line(
        f"{verb}: {data['runs']} run(s), {data['iterations']} iteration(s), "
        f"{data['decisions']} decision(s), {data['claims']} ended claim(s), "
        f"{data['log_folders']} log folder(s) ({data['log_bytes']} bytes), "
        f"{data['cli_folders']} CLI folder(s) of ended tasks"
    )


def register(app: typer.Typer) -> None:
    app.command("prune")(prune_command)
