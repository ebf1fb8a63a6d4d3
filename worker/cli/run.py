"""`worker run`: one unit of work."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for


def run(
    workspace: WorkspaceOpt = Path("."),
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Show the decision and the agent command line; change nothing."
        ),
    ] = False,
    task_id: Annotated[
        str | None,
        typer.Option("--task-id", help="Run this task (again), e.g. msg-123 or owner/name#12."),
    ] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="Force the starting mode.")] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Force the model of every mode.")
    ] = None,
    use_worktree: Annotated[
        bool,
        typer.Option(
            "--use-worktree",
            help="Work in a git worktree on branch worker/<task-id> this run, also for a source "
            "delivered in place (worker.toml's [github] delivery, inbox_delivery).",
        ),
    ] = False,
    open_pr: Annotated[
        bool,
        typer.Option(
            "--open-pr",
            help="On success with --use-worktree, "
            "push the branch and open a pull request (GitHub "
            "tasks).",
        ),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress lines; only the result.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Resume a ready wait state, or take the next task, drive the agent, report."""
    from worker.process.signals import stop_signals
    from worker.run.runner import RunOptions, request_stop, run_once

    settings = settings_for(workspace)
    progress = ui.LiveProgress(quiet=quiet or as_json)
    # SIGTERM (cron, systemd, Task Scheduler ending the job) or Ctrl-C: the agent's process
    # group is ended, its work kept and the task released, instead of an orphaned agent
    # working on while its lease runs out and another run takes the same task.
    with stop_signals(lambda name: request_stop(f"{name} received")):
        report = run_once(
            settings,
            RunOptions(
                dry_run=dry_run,
                task_id=task_id,
                mode=mode,
                model=model,
                use_worktree=use_worktree,
                open_pr=open_pr or None,
                progress=progress,
            ),
        )
    ui.emit(report.to_json(), as_json, _render)
    raise typer.Exit(report.exit_code)


def _render(data: dict[str, Any]) -> None:
    codes = ", ".join(data["reason_codes"])
    if data["outcome"] == "dry_run":
        for error in data["source_errors"]:
            ui.line(f"source error: {error}")
        _render_dry_run(data, codes)
        return
    for note in data.get("notes") or []:  # what the looks at pull requests saw
        ui.line(f"seen: {note}")
    if data["outcome"] == "idle":
        ui.line(f"idle: nothing to do ({codes})")
        return
    if "PR_ENDED" in data["reason_codes"] and not data["iterations"]:
        ui.line(f"{data['outcome']}: {data['task_id']}: {data['reason']}")
        return
    ui.line(
        f"{data['outcome']}: {data['task_id']} from {data['source']} after "
        f"{data['iterations']} iteration(s) in {' -> '.join(data['modes']) or '-'}, "
        f"${data['cost_usd']:.4f}, {data['duration_s']:.1f}s"
    )
    if data["reason"]:
        ui.line(f"reason: {data['reason']}")
    reviewers = data["reviewers"]
    if reviewers["duration_s"] or reviewers["cost_usd"]:
        ui.line(
            f"reviewers: {reviewers['duration_s']:.1f}s, ${reviewers['cost_usd']:.4f}"
            " (apart from the task's)"
        )
    if data["wait_state"]:
        ui.line(f"wait state: {data['wait_state']}")
    if data["branch"]:
        ui.line(f"branch: {data['branch']}")
    ui.line(f"reason codes: {codes}")


def _render_dry_run(data: dict[str, Any], codes: str) -> None:
    notes = data.get("notes") or []
    if data["task_id"] is None:
        ui.line(f"dry run: nothing to do ({codes})")
    else:
        ui.line(f"dry run: would take {data['task_id']} from {data['source']} ({codes})")
        ui.line(f"mode: {data['mode']} ({data['mode_reason']})")
        if data["reason"]:
            ui.line(data["reason"])
        ui.line("agent command: " + " ".join(data["command"] or []) + "  (prompt on stdin)")
    for note in notes:
        if note.startswith("reviewers:"):
            ui.line(note)
        else:
            ui.warn(note)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
