"""`worker inspect TRANSCRIPT`: why did my agent loop last night?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for


def inspect_command(
    transcript: Annotated[
        Path,
        typer.Argument(
            help="A recorded transcript: Claude, Codex or Gemini JSON lines, an OpenHands "
            "trajectory, a SWE-agent .traj or a mini-swe-agent .traj.json."
        ),
    ],
    workspace: WorkspaceOpt = Path("."),
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="auto, claude, codex, gemini, openhands or sweagent; checked against the "
            "content (exit 65 when it disagrees).",
        ),
    ] = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Replay a transcript through the supervisor: each anomaly, where it starts, the steering."""
    from worker.supervision.postmortem import inspect_transcript

    settings = settings_for(workspace, lenient=True)
    report = inspect_transcript(transcript, settings.supervision, fmt)
    ui.emit(report.to_dict(), as_json, _render)


def _render(data: dict[str, Any]) -> None:
    fill = data["peak_context_fill"]
    ui.line(
        f"{data['path']}: {data['format']}, {data['events']} events, {data['turns']} turns, "
        f"{data['tool_calls']} tool calls ({data['tool_failures']} failed), "
        f"model {data['model'] or '-'}, context peak "
        f"{'-' if fill is None else f'{fill:.0%}'}, PACE {data['pace']}"
    )
    if not data["findings"]:
        ui.line("no anomalies")
    for item in data["findings"]:
        held = " (held back by the cooldown)" if item["suppressed"] else ""
        grew = ""
        if item["peak"] != item["count"]:
            grew = f", grew to {_count(item['kind'], item['peak'])}"
        ui.line(
            f"event {item['start_event']} (line {item['start_line']}): {item['kind']} "
            f"{item['level']} {_count(item['kind'], item['count'])}{grew}, "
            f"seen at event {item['detected_event']}{held}"
        )
        ui.line(f"  {item['steering']}")
    stop = data["stop"]
    if stop:
        ui.line(
            f"would stop the agent at event {stop['event']} (line {stop['line']}): {stop['reason']}"
        )


def _count(kind: str, count: int) -> str:
    if kind == "context":
        return f"{count}% full"
    if kind in ("cascade", "permission", "infrastructure"):
        return f"{count} tools"
    if kind == "pace":
        return f"after {count} anomalies"
    if kind == "cli_error":
        return f"{count} sessions"
    return f"×{count}"


def register(app: typer.Typer) -> None:
    """Add this module's commands to the main app."""
    app.command("inspect")(inspect_command)
