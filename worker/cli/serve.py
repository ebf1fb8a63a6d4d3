"""`worker serve`: the batch cycle in a loop, with health signals, until SIGTERM/SIGINT."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for
from worker.humanize import duration

# A shorter wait starts the next cycle within the minute: its time would say nothing, and a
# line per cycle would flood the journal.
_SAY_NEXT_FROM_S = 60.0

if TYPE_CHECKING:
    from worker.config import Settings
    from worker.daemon.serve import Cycle


def serve_command(
    workspace: WorkspaceOpt = Path("."),
    interval: Annotated[
        float | None,
        typer.Option("--interval", min=0.001, help="Seconds between runs (daemon.interval_s)."),
    ] = None,
    max_cycles: Annotated[
        int | None, typer.Option("--max-cycles", min=1, help="Stop after this many runs.")
    ] = None,
    use_worktree: Annotated[
        bool,
        typer.Option("--use-worktree", help="Work in a git worktree on branch worker/<task-id>."),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No banner and no progress lines.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run the batch cycle continuously: one run, then sleep until the interval ends or a
    message arrives. SIGTERM/SIGINT stop the running agent, keep its work, release the task."""
    settings = settings_for(workspace)
    if interval is not None:
        daemon = settings.daemon.model_copy(update={"interval_s": interval})
        settings = settings.with_sections(daemon=daemon)
    from worker.daemon.serve import serve
    from worker.operator.notify.telegram import Poller
    from worker.state.run_report import RunOptions

    progress = ui.LiveProgress(quiet=quiet or as_json)
    progress.note(
        f"worker serve on {settings.machine_id}: {settings.workspace}, a run every "
        f"{duration(settings.daemon.interval_s)} or when a message arrives; Ctrl-C stops"
    )
    poller = Poller(settings).start()  # Telegram's commands, read as they come
    try:
        report = serve(
            settings,
            max_cycles=max_cycles,
            make_options=lambda: RunOptions(progress=progress, use_worktree=use_worktree),
            on_cycle=lambda cycle: _print_cycle(progress, cycle, settings, max_cycles),
        )
    finally:
        poller.stop()
    data = {
        "cycles": report.cycles,
        "exit_code": report.exit_code,
        "stopped_by": report.stopped_by,
        "last": [vars(cycle) for cycle in report.last],
    }
    ui.emit(
        data, as_json, lambda d: ui.line(f"stopped after {d['cycles']} run(s): {d['stopped_by']}")
    )
    raise typer.Exit(report.exit_code)


def _print_cycle(
    progress: ui.LiveProgress, cycle: Cycle, settings: Settings, max_cycles: int | None
) -> None:
    from worker.daemon.serve import CONFIG_ERROR  # loaded by serve already

    detail = f" ({cycle.detail})" if cycle.detail else ""
    # The run's own number (`worker log`, `worker show`); a cycle that made no run says so.
    which = f"run {cycle.run_id}" if cycle.run_id is not None else f"cycle {cycle.number}"
    progress.note(f"{which}: {cycle.outcome}{detail}")
    if cycle.number == max_cycles or cycle.outcome == CONFIG_ERROR:
        return
    wait_s = (
        settings.daemon.busy_retry_s if cycle.outcome == "locked" else settings.daemon.interval_s
    )
    if wait_s >= _SAY_NEXT_FROM_S:
        upcoming = datetime.now().astimezone() + timedelta(seconds=wait_s)
        progress.note(f"next cycle at {upcoming:%H:%M} (sooner when a message arrives)")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the main app."""
    app.command("serve")(serve_command)
