"""Options shared by every command, and the one way a command gets its settings."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from worker.config import Settings

WorkspaceOpt = Annotated[
    Path,
    typer.Option(
        "--workspace",
        "-w",
        envvar="WORKER_WORKSPACE",
        file_okay=False,
        help="The workspace folder (default: the current folder).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of text.")]


def settings_for(workspace: Path) -> Settings:
    """Load the workspace's settings; a ConfigError reaches main() and exits 78."""
    from worker.config import load_settings  # pydantic is not needed for `--help`

    return load_settings(workspace)
