"""`worker cancel TASK`: an order to stop (or pause, or resume) a task, wherever it is."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for


def cancel(
    task: Annotated[
        str, typer.Argument(help="The task id (e.g. msg-123, owner/name#12), or * for every task.")
    ],
    pause: Annotated[
        bool,
        typer.Option(
            "--pause",
            help="Pause instead of cancelling: the task is kept and resumes on `--resume`.",
        ),
    ] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Resume a paused task.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Leave the order even for a task not seen yet.")
    ] = False,
    reason: Annotated[str, typer.Option("--reason", help="Why (told to the task's source).")] = "",
    workspace: WorkspaceOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Cancel a task: a running one is stopped within seconds (its work kept), a waiting one
    cancelled, a queued one dropped; its source is told."""
    from worker.errors import UsageError
    from worker.kernel.control import write_order
    from worker.kernel.model import Order
    from worker.state.known_tasks import require_known

    if pause and resume:
        raise UsageError("--pause and --resume cannot be used together")
    order = Order.PAUSE if pause else Order.RESUME if resume else Order.CANCEL
    settings = settings_for(workspace)
    if settings.fleet.enabled:  # every machine's control poll reads the fleet database
        from worker.fleet.orders import send_order

        # Other machines' tasks are not known here: the fleet database takes any order.
        order_id, where = send_order(settings, task, order, reason), settings.fleet.shown_url()
    else:
        require_known(settings, task, force=force)
        written = write_order(settings, task, order, reason)
        order_id, where = written.id, str(written.ref)
    ui.emit(
        {"order": order_id, "action": order.value, "task": task, "reason": reason, "file": where},
        as_json,
        _render,
    )


def _render(data: dict[str, Any]) -> None:
    ui.line(
        f"{data['action']} order {data['order']} for {data['task']} written; a running "
        "worker obeys it within seconds, otherwise the next run does."
    )


def register(app: typer.Typer) -> None:
    app.command("cancel")(cancel)
