"""`worker dashboard`: the web page an operator leaves open (needs `worker[web]`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from worker.cli import ui
from worker.cli.common import WorkspaceOpt, settings_for
from worker.errors import UsageError

if TYPE_CHECKING:
    from worker.web.server import Served


def dashboard_command(
    workspace: WorkspaceOpt = Path("."),
    host: Annotated[
        str,
        typer.Option("--host", help="Listen here; other than loopback only with a token."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="The TCP port.")] = 8765,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            dir_okay=False,
            help="A file holding the token actions need (default: $WORKER_DASHBOARD_TOKEN, "
            "else one made now and shown once).",
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option("--name", help="Who acts through this dashboard: recorded as web:NAME."),
    ] = None,
) -> None:
    """Serve a web dashboard: machines, the running task live, waits to approve or reject,
    the queue, history, spend. Binds 127.0.0.1; every action needs the token."""
    try:
        from worker.web.server import read_token, serve
    except ImportError as exc:
        raise UsageError(
            f"the dashboard needs the web extra ({exc.name} is missing): pip install 'worker[web]'"
        ) from exc
    from worker.waits.authored import os_user

    settings = settings_for(workspace)
    token = read_token(token_file)
    serve(
        settings,
        host=host,
        port=port,
        token=token,
        name=name or os_user().replace(" ", "-"),
        on_ready=_ready,
    )


def _ready(served: Served) -> None:
    ui.line(f"dashboard on {served.url} (Ctrl-C stops it); actions as {served.auth.actor}")
    if served.auth.generated:  # shown here once, to the operator: never logged or stored
        ui.line(f"log in at {served.url}/login with this token: {served.auth.token}")
    if served.private:
        ui.line(f"reading needs a login too: {served.private}")
    sys.stdout.flush()  # seen now, not when the server stops (stdout may be a pipe)


def register(app: typer.Typer) -> None:
    app.command("dashboard")(dashboard_command)
