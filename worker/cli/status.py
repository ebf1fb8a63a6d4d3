"""`worker status`: at a glance, the waiting tasks, the claims, the files set aside, the last
run; `--check` also checks the database."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from worker import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for
from worker.errors import UsageError
from worker.humanize import duration

_SHOWN = 20  # files set aside listed in text; --json lists them all

CheckOpt = Annotated[
    bool, typer.Option("--check", help="Also run SQLite's integrity check on the database.")
]
FleetOpt = Annotated[bool, typer.Option("--fleet", help="Every machine, from the fleet database.")]


def status_command(
    workspace: WorkspaceOpt = Path("."),
    as_json: JsonOpt = False,
    check: CheckOpt = False,
    fleet: FleetOpt = False,
) -> None:
    """Show the waiting tasks (what each waits for, since when), the claims and their leases,
    the files set aside in rejected/, and the last run."""
    from worker.integrity import status

    settings = settings_for(workspace)
    if fleet:
        from worker.fleet.view import fleet_status

        if not settings.fleet.enabled:
            raise UsageError("--fleet needs [fleet] database_url (or WORKER_FLEET__DATABASE_URL)")
        ui.emit(fleet_status(settings), as_json, _render_fleet)
        return
    data = status(settings, check=check)
    ui.emit(data, as_json, _render)
    if check and not data["check"]["ok"]:
        raise typer.Exit(1)


def _render_fleet(data: dict[str, Any]) -> None:
    rows = [
        {
            "machine": m["machine"],
            "running": ", ".join(m["running"]) or "-",
            "waiting": ", ".join(m["waiting"]) or "-",
            "last run": _last(m.get("last_run")),
        }
        for m in data["machines"]
    ]
    if not rows:
        ui.line(f"no machines in {data['database']} yet")
        return
    ui.table(rows, ["machine", "running", "waiting", "last run"], title=data["database"])


def _last(run: dict[str, Any] | None) -> str:
    if not run:
        return "-"
    parts = [f"#{run['id']}", run["outcome"] or "running", run["task_id"]]
    return " ".join(part for part in parts if part) + f", {duration(run['age'])} ago"


def _render(data: dict[str, Any]) -> None:
    state = data["state"]
    ui.line(f"state: {state['state_dir']}")
    ui.line(f"inbox: {state['inbox_dir']}")
    for key in state["in_workspace"]:
        ui.warn(f"{key} lies inside the workspace: the agent can write there")
    if state["legacy_state"]:
        ui.warn(f"old state folder {state['legacy_state']}: the next run moves it")
    last = data["last_run"]
    if last:
        when = datetime.fromtimestamp(last["started_at"], UTC).strftime("%Y-%m-%d %H:%M")
        ui.line(
            f"last run: #{last['id']} at {when} UTC: {last['outcome'] or 'running'} "
            f"{last['task_id'] or ''}".rstrip()
        )
    else:
        ui.line("last run: none yet")
    _render_claims(data["claims"])
    waiting = data["waiting"]
    if not waiting:
        ui.line("waiting: none")
    else:
        ui.line(f"waiting: {len(waiting)}")
        rows = [
            {
                "task": w["task_id"],
                "waits for": w["wait_for"] or w["resume_when"],
                "condition": w["resume_when"],
                "since": w["since"][:19].replace("T", " "),
                "for": duration(w["waiting_s"]),
                "ready": "yes" if w["ready"] else "no",
            }
            for w in waiting
        ]
        ui.table(rows, ["task", "condition", "waits for", "since", "for", "ready"])
    for item in data["rejected"][:_SHOWN]:
        ui.warn(f"{item['kind']} set aside: {item['file']}: {item['reason']}")
    if len(data["rejected"]) > _SHOWN:
        ui.warn(f"... and {len(data['rejected']) - _SHOWN} more set aside (see --json)")
    if "check" in data:
        check = data["check"]
        verdict = "ok" if check["ok"] else "PROBLEM"
        ui.line(
            f"database check: {verdict}: integrity {check['integrity']}, "
            f"journal mode {check['journal_mode']}"
        )


def _render_claims(claims: list[dict[str, Any]]) -> None:
    if not claims:
        ui.line("claimed: none")
        return
    ui.line(f"claimed: {len(claims)}")
    rows = [
        {
            "task": c["task_id"],
            "source": c["source"],
            "run": c["run_id"] if c["run_id"] is not None else "-",
            "lease": _lease(c),
        }
        for c in claims
    ]
    ui.table(rows, ["task", "source", "run", "lease"])


def _lease(claim: dict[str, Any]) -> str:
    if claim["lease_until"] is None:
        return "no claim in this workspace's database (another workspace's?)"
    if claim["expired"]:
        return f"expired {duration(-claim['lease_left_s'])} ago; the next run gives it back"
    return f"{duration(claim['lease_left_s'])} left"


def register(app: typer.Typer) -> None:
    app.command("status")(status_command)
