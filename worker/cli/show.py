"""`worker show RUN`: one run (by its number, or a task's latest), iteration by iteration."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for


def show_command(
    run: Annotated[
        str,
        typer.Argument(help="A run number, or a task id for its latest run (see `worker log`)."),
    ],
    workspace: WorkspaceOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """List each iteration of a run: its STATUS line, cost, tools used and files written."""
    from worker.state.run_log import run_detail

    ui.emit(run_detail(settings_for(workspace), run), as_json, _render)


def _render(data: dict[str, Any]) -> None:
    run = data["run"]
    title = f" ({run['title']})" if run["title"] else ""
    ui.line(f"run {run['run']} on {run['machine']}: {run['task'] or 'no task'}{title}")
    codes = ", ".join([*run["decision_codes"], *run["outcome_codes"]])
    ui.line(
        f"{run['outcome']}: {run['reason'] or '-'} ({codes}); {run['iterations']} iteration(s),"
        f" ${run['cost_usd']:.4f}, {run['duration_s']:.1f} s"
    )
    for it in data["iterations"]:
        status = f"STATUS: {it['status']}" + (f" - {it['reason']}" if it["reason"] else "")
        if it["reason_code"]:
            status += f" ({it['reason_code']})"
        tools = ", ".join(f"{name} x{n}" for name, n in it["tools"].items()) or "none"
        ui.line(
            f"  #{it['seq']} {it['mode']} ({it['model']}) iteration {it['iteration']}:"
            f" {it['duration_s']:.1f} s, ${it['cost_usd']:.4f},"
            f" {it['input_tokens'] + it['output_tokens']:,} tokens"
            + (f", sandboxed ({it['sandbox']})" if it.get("sandbox") else ", not sandboxed")
        )
        ui.line(f"    {status}")
        ui.line(f"    tools: {tools}")
        ui.line(f"    files written: {', '.join(it['files']) or 'none'}")
        for line in it.get("sandbox_refused") or []:
            ui.line(f"    sandbox refused: {line}")


def register(app: typer.Typer) -> None:
    app.command("show")(show_command)
