"""`worker status`: at a glance, what runs, waits, holds a lease, queues, was set aside, failed
and cost; `--check` also checks the database."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for
from worker.errors import UsageError
from worker.humanize import CONDITION_WORDS, duration, moment, yes_no

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
    """Show the running task (iteration, elapsed, cost, current tool), the waits (what each
    waits for, since when), the claims and their leases, the queue per source, the files set
    aside in rejected/, the last failures and today's spend."""
    from worker.operator.status import status

    settings = settings_for(workspace, lenient=True)
    if fleet:
        from worker.fleet.view import fleet_status

        if not settings.fleet.enabled:
            raise UsageError("--fleet needs [fleet] database_url (or WORKER_FLEET__DATABASE_URL)")
        ui.emit(fleet_status(settings), as_json, _render_fleet)
        return
    data = status(settings, check=check)
    ui.emit(data, as_json, _render)
    for problem in data["database_problems"] if not as_json else ():
        ui.error(problem)
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
    if state.get("legacy_wait_states"):
        ui.warn(f"wait states in {state['legacy_wait_states']}: the next run moves them")
    _running(data)
    _render_claims(data["claims"])
    _waiting(data)
    queue = data["queue"] or {}
    if "error" in queue:
        ui.warn(f"queue not read: {queue['error']}")
    else:
        ui.line("queue: " + (", ".join(f"{k} {v}" for k, v in queue.items()) or "empty"))
    for item in data.get("inbox_odd") or []:
        ui.warn(f"{item['source']}: {item['name']}: {item['what']}")
    _failures(data)
    _maintenance(data.get("maintenance_problem"))
    cap = data["daily_cost_cap_usd"]
    ui.line(f"spent today: ${data['spent_today_usd']:.4f}" + (f" of ${cap:.2f}" if cap else ""))
    if data["unsent"]:
        ui.warn(f"{data['unsent']} notification(s) not sent yet; they are retried on each run")
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


def _running(data: dict[str, Any]) -> None:
    last = data["last_run"]
    if data["max_parallel"] > 1:
        busy = sum(1 for run in data["running"] if run["task_id"])
        ui.line(f"slots: {busy} of {data['max_parallel']} running a task")
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
                + (f": {w['wait_for']}" if w["wait_for"] else "")
                + (f" (now {w['pull_request']})" if w.get("pull_request") else ""),
                "since": moment(w["since"]),
                "for": duration(w["waiting_s"]),
                "ready": yes_no(w["ready"]),
            }
            for w in waiting
        ]
        ui.table(rows, ["task", "waits for", "since", "for", "ready"])


def _maintenance(problem: dict[str, Any] | None) -> None:
    if problem:
        ui.warn(
            f"maintenance cannot run its checks (since {moment(problem['since'])}): "
            f"{problem['problem']}. No agent is started for it; it tries again when the "
            "project or worker.toml changes"
        )


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
