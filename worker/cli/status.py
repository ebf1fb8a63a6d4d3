"""`worker status`: at a glance, what runs, waits, holds a lease, queues, failed and cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from worker import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for
from worker.humanize import CONDITION_WORDS, duration, moment, yes_no


def status_command(workspace: WorkspaceOpt = Path("."), as_json: JsonOpt = False) -> None:
    """Show the running task (iteration, elapsed, cost, current tool), the waits (what each
    waits for, since when), the claims and their leases, the queue per source, the last
    failures and today's spend."""
    from worker.operator_status import status

    ui.emit(status(settings_for(workspace)), as_json, _render)


def _render(data: dict[str, Any]) -> None:
    _running(data)
    _waiting(data)
    claims = data["claims"]
    ui.line(f"claims: {len(claims) or 'none'}")
    if claims:
        ui.table(
            [{**c, "lease": _lease(c["lease_left_s"])} for c in claims],
            ["task_id", "source", "machine", "run", "lease"],
        )
    queue = data["queue"] or {}
    if "error" in queue:
        ui.warn(f"queue not read: {queue['error']}")
    else:
        ui.line("queue: " + (", ".join(f"{k} {v}" for k, v in queue.items()) or "empty"))
    _failures(data)
    cap = data["daily_cost_cap_usd"]
    ui.line(f"spent today: ${data['spent_today_usd']:.4f}" + (f" of ${cap:.2f}" if cap else ""))
    if data["unsent"]:
        ui.warn(f"{data['unsent']} notification(s) not sent yet; they are retried on each run")
    if data["quarantined"]:
        ui.warn(f"{data['quarantined']} unreadable wait-state file(s) set aside")


def _running(data: dict[str, Any]) -> None:
    last = data["last_run"]
    if not data["running"]:
        ui.line(
            f"running: nothing (last run #{last['id']} {moment(last['started_at'])}: "
            f"{last['outcome'] or 'running'})"
            if last
            else "running: nothing (no run yet)"
        )
    for run in data["running"]:
        ui.line(
            f"running: {run['task_id'] or '(choosing a task)'} {run['title']}".rstrip()
            + f" (run {run['run']} on {run['machine']})"
        )
        if run["iteration"]:
            ui.line(
                f"  {run['mode']} ({run['model']}) iteration {run['iteration']}/"
                f"{run['max_iterations']}, {duration(run['elapsed_s'])} elapsed,"
                f" ${run['cost_usd']:.4f}, tool: {run['tool'] or '-'}"
            )
        if run["finding"]:
            ui.line(f"  supervisor: {run['finding']}")


def _waiting(data: dict[str, Any]) -> None:
    waiting = data["waiting"]
    ui.line(f"waiting: {len(waiting) or 'none'}")
    if waiting:
        rows = [
            {
                "task": w["task_id"],
                "waits for": CONDITION_WORDS.get(w["resume_when"], w["resume_when"])
                + (f": {w['wait_for']}" if w["wait_for"] else ""),
                "since": moment(w["since"]),
                "for": duration(w["waiting_s"]),
                "ready": yes_no(w["ready"]),
            }
            for w in waiting
        ]
        ui.table(rows, ["task", "waits for", "since", "for", "ready"])


def _failures(data: dict[str, Any]) -> None:
    failures = data["failures"]
    if not failures:
        return
    ui.line("last failures:")
    ui.table(
        [
            {
                **f,
                "when": moment(f["started_at"]),
                "codes": ", ".join(f["codes"]) or None,
                "reason": (f["reason"] or "")[:200],
            }
            for f in failures
        ],
        ["run", "when", "task", "title", "codes", "reason"],
    )


def _lease(seconds: float) -> str:
    return f"{duration(seconds)} left" if seconds > 0 else f"expired {duration(-seconds)} ago"


def register(app: typer.Typer) -> None:
    app.command("status")(status_command)
