"""`worker directives list|drop` and `worker knowledge list|reviewers`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for

directives_app = typer.Typer(
    help="The reviewers' directives: what the next tasks must address.", no_args_is_help=True
)
knowledge_app = typer.Typer(
    help="The knowledge store (docs/knowledge/) and the reviewers that keep it.",
    no_args_is_help=True,
)


@directives_app.command("list")
def list_command(
    workspace: WorkspaceOpt = Path("."),
    include_done: Annotated[
        bool, typer.Option("--all", help="Also directives already dealt with, and their fates.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """List pending directives in the order prompts show them."""
    from worker.review.service import list_directives

    data = list_directives(settings_for(workspace), include_done=include_done)
    ui.emit(data, as_json, _render_directives)


def _render_directives(data: dict[str, Any]) -> None:
    if not data["directives"]:
        ui.line("no directives")
        return
    columns = ["id", "priority", "type", "source", "state", "description"]
    if any(d["state"] != "pending" for d in data["directives"]):
        columns.append("fate_note")
    ui.table(data["directives"], columns)


@directives_app.command("drop")
def drop_command(
    directive: Annotated[str, typer.Argument(help="The directive's id, like D12.")],
    workspace: WorkspaceOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Drop a pending directive: no later task will be asked to address it."""
    from worker.review.service import drop_directive

    data = drop_directive(settings_for(workspace), directive)
    ui.emit(data, as_json, lambda d: ui.line(f"dropped {d['dropped']['id']}"))


@knowledge_app.command("list")
def knowledge_list(workspace: WorkspaceOpt = Path("."), as_json: JsonOpt = False) -> None:
    """List the knowledge docs with their status and who wrote them."""
    from worker.review.service import knowledge_docs

    data = knowledge_docs(settings_for(workspace))

    def render(d: dict[str, Any]) -> None:
        if not d["docs"]:
            ui.line(f"no knowledge docs in {d['root']}")
            return
        columns = ["path", "status", "writer", "after_task", "rules", "needs_review", "title"]
        ui.table(d["docs"], columns)

    ui.emit(data, as_json, render)


@knowledge_app.command("reviewers")
def reviewers_command(
    workspace: WorkspaceOpt = Path("."),
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many runs.")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """Show the reviewers: intervals, recent runs and what they cost."""
    from worker.review.service import review_status

    data = review_status(settings_for(workspace), limit=limit)

    def render(d: dict[str, Any]) -> None:
        ui.table(d["reviewers"], ["reviewer", "enabled", "interval", "since_last_run", "runs"])
        ui.line(f"urgency {d['urgency']:.1f}; reviewers cost ${d['cost_usd']:.4f} in all")
        if d["runs"]:
            ui.table(
                d["runs"],
                ["id", "reviewer", "task_seq", "trigger", "outcome", "cost_usd", "summary"],
            )

    ui.emit(data, as_json, render)


def register(app: typer.Typer) -> None:
    app.add_typer(directives_app, name="directives")
    app.add_typer(knowledge_app, name="knowledge")
