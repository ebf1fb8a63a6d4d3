"""`worker modes list|validate`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for

app = typer.Typer(help="Show and check the modes (modes/modes.json).", no_args_is_help=True)


def _load(workspace: Path, file: Path | None) -> Any:
    from worker.modes import load_modes, modes_path

    if file is not None:
        return load_modes(file)
    settings = settings_for(workspace)
    return load_modes(modes_path(settings.workspace, settings.modes_file))


@app.command("list")
def list_modes(workspace: WorkspaceOpt = Path("."), as_json: JsonOpt = False) -> None:
    """List the modes, their models, iteration caps and escalation chains."""
    modes = _load(workspace, None)
    rows = [
        {
            "id": mode.id,
            "model": mode.model,
            "agent": mode.agent,
            "max_iterations": mode.max_iterations,
            "escalates_to": mode.escalation.trigger_mode if mode.escalation else None,
            "chain": " -> ".join(modes.chain(mode.id)),
            "default": mode.default,
        }
        for mode in modes.modes.values()
    ]
    if as_json:
        ui.print_json({"source": modes.source, "modes": rows})
        return
    ui.table(
        rows,
        ["id", "model", "agent", "max_iterations", "escalates_to", "chain"],
        title=f"modes from {modes.source}",
    )


@app.command("validate")
def validate(
    workspace: WorkspaceOpt = Path("."),
    file: Annotated[
        Path | None, typer.Argument(help="A modes file (default: the workspace's).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a modes file: schema, known trigger modes, no escalation cycles, each
    permissionMode one its agent accepts (exit 78 if not). Lists the allowed values."""
    from worker.modes import PERMISSION_MODES

    modes = _load(workspace, file)
    allowed = {agent: list(values) for agent, values in PERMISSION_MODES.items()}
    if as_json:
        ui.print_json(
            {
                "valid": True,
                "source": modes.source,
                "modes": list(modes.modes),
                "permission_modes": allowed,
            }
        )
        return
    ui.line(f"ok: {len(modes.modes)} modes in {modes.source}")
    ui.line("permissionMode values per agent:")
    for agent, values in allowed.items():
        ui.line(f"  {agent}: {', '.join(values)}")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="modes")
