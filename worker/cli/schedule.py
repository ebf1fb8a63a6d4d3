"""`worker schedule cron|systemd|windows`: print what to install to run worker unattended."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for
from worker.process.platform.schedule import Kind, Target, render, schedule_env


def schedule_command(
    kind: Annotated[Kind, typer.Argument(help="cron, systemd or windows.")],
    target: Annotated[
        Target,
        typer.Option(
            "--target",
            help="What to schedule: one `worker run` per tick, "
            "or a long-running `worker supervise`.",
        ),
    ] = Target.RUN,
    workspace: WorkspaceOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Print a crontab line, systemd units or a Task Scheduler XML for this workspace. They
    carry this shell's PATH, WORKER_* variables (never a secret: those are left out) and
    state folder."""
    settings = settings_for(workspace)
    result = render(
        kind, target, settings, python=sys.executable, env=schedule_env(os.environ, settings)
    )
    data = {"kind": result.kind.value, "target": result.target.value, "files": result.files}
    ui.emit(data, as_json, _render)


def _render(data: dict[str, object]) -> None:
    files = data["files"]
    assert isinstance(files, dict)
    for index, (name, content) in enumerate(files.items()):
        if len(files) > 1:
            ui.line(("" if index == 0 else "\n") + f"# ---- {name} ----")
        sys.stdout.write(content)  # verbatim: Rich would wrap long ExecStart lines


def register(app: typer.Typer) -> None:
    """Add this module's commands to the main app."""
    app.command("schedule")(schedule_command)
