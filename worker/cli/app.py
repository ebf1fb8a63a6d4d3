"""The `worker` command: one Typer app, one sub-module per command group."""

from __future__ import annotations

import logging
import sys

import typer

from worker import __version__
from worker.cli import (
    cancel,
    costs,
    directives,
    doctor,
    fleet,
    inspect,
    intercom,
    log,
    modes,
    prune,
    queue,
    run,
    schedule,
    serve,
    show,
    status,
    submit,
    supervise,
    waits,
    why,
)
from worker.errors import ExitCode, WorkerError

app = typer.Typer(
    name="worker",
    help="Run coding agents on a queue of tasks, unattended: one unit of work per run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,  # tracebacks never show local variables (tokens live there)
    rich_markup_mode=None,
)

for module in (
    run,
    modes,
    log,
    waits,
    intercom,
    status,
    inspect,
    fleet,
    why,
    cancel,
    directives,
    serve,
    supervise,
    schedule,
    doctor,
    prune,
    submit,
    queue,
    show,
    costs,
):
    module.register(app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"worker {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug lines to stderr."),
) -> None:
    from worker import ui

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING, handlers=[ui.LogLines(verbose)]
    )


def main() -> None:
    """Console entry point: WorkerError becomes a message on stderr and its exit code."""
    try:
        app()
    except WorkerError as exc:
        from worker import ui

        ui.error(str(exc))
        sys.exit(int(exc.exit_code))
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # last resort: a message, and the traceback in the debug log
        logging.getLogger("worker").debug("unexpected error", exc_info=True)
        from worker import ui

        ui.error(f"unexpected {type(exc).__name__}: {exc} (run with -v for details)")
        sys.exit(int(ExitCode.TASK_FAILED))
