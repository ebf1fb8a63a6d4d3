"""`worker doctor`: check what a run needs and say what to fix (exit 0, or 78 if not)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for


def doctor_command(workspace: WorkspaceOpt = Path("."), as_json: JsonOpt = False) -> None:
    """Check the agent CLIs, state and inbox folders, modes, GitHub token and repositories,
    the environment a scheduled run sees, and Gemini CLI's trust and auth settings."""
    from worker.operator.doctor import run_doctor  # its checks import the GitHub client

    report = run_doctor(settings_for(workspace, lenient=True, warn=False))
    ui.emit(report.as_dict(), as_json, _render)
    raise typer.Exit(int(report.exit_code))


def _render(data: dict[str, Any]) -> None:
    for finding in data["findings"]:
        ui.line(f"{finding['status']:<5} {finding['check']:<12} {finding['message']}")
    verdict = "nothing to fix" if data["ok"] else "fix what says fail (exit 78)"
    ui.line(verdict)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the main app."""
    app.command("doctor")(doctor_command)
