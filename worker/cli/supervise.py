"""`worker supervise` and `worker supervise status`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for

sub = typer.Typer(
    help="Keep `worker serve` running: restarts with backoff, crash-loop detection, "
    "promotion and rollback of revisions.",
    rich_markup_mode=None,
)


@sub.callback(invoke_without_command=True)
def supervise_command(
    ctx: typer.Context,
    workspace: WorkspaceOpt = Path("."),
    allow_root: Annotated[
        bool, typer.Option("--allow-root", help="Run even as root (not recommended).")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Do not print the child's starts and exits.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Start `worker serve` as a child and keep it alive until SIGTERM/SIGINT; print each
    start, exit and restart of the child as it happens."""
    if ctx.invoked_subcommand is not None:
        return
    from worker.daemon.supervise_watch import EventWatch
    from worker.daemon.supervisor import supervise

    settings = settings_for(workspace)
    progress = ui.LiveProgress(quiet=quiet or as_json)
    with EventWatch(settings, progress.note):
        report = supervise(settings, allow_root=allow_root)
    data = {
        "exit_code": report.exit_code,
        "reason": report.reason,
        "current_good_rev": report.current_good_rev,
    }
    ui.emit(data, as_json, lambda d: ui.line(f"supervisor stopped: {d['reason'] or 'done'}"))
    raise typer.Exit(report.exit_code)


@sub.command("status")
def status_command(workspace: WorkspaceOpt = Path("."), as_json: JsonOpt = False) -> None:
    """Show the supervisor's state, its restart history and the revisions it has seen."""
    from worker.daemon.status import supervise_status

    data = supervise_status(settings_for(workspace))
    ui.emit(data, as_json, _render)


def _render(data: dict[str, Any]) -> None:
    sup, state = data["supervisor"], data["state"]
    ui.line(
        f"supervisor: {'running, pid ' + str(sup.get('pid')) if sup['running'] else 'not running'}"
    )
    for key in ("current_good_rev", "candidate_rev", "last_failure_reason"):
        ui.line(f"{key}: {state[key] or '-'}")
    beat = data["serve"].get("serve.heartbeat") or {}
    if beat.get("at"):
        phase = beat.get("phase", "-")
        ui.line(f"serve heartbeat: {_when(beat['at'])} (pid {beat.get('pid')}, {phase})")
    events = [
        {**e, "at": _when(e["at"]), "revision": _short(e["revision"])} for e in data["events"]
    ]
    ui.table(
        events,
        ["at", "kind", "revision", "pid", "exit_code", "delay_s", "reason"],
        title="restart history",
    )
    revs = [
        {
            **r,
            "revision": _short(r["revision"]),
            "promoted_at": _when(r["promoted_at"]) if r["promoted_at"] else None,
        }
        for r in data["revisions"]
    ]
    ui.table(
        revs,
        ["revision", "build_ok", "health_ok", "promoted_at", "failure_reason"],
        title="revisions",
    )


def _short(rev: str | None) -> str | None:
    return rev[:12] if rev else None


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the main app."""
    app.add_typer(sub, name="supervise")
