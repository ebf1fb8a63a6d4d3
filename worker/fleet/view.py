"""What every machine is doing, read from the fleet database: `worker fleet`, `worker log
--fleet` and `worker status --fleet`. Ages are computed by the database (`now()`), so a reader
whose clock is off still sees the right ones."""

from __future__ import annotations

from typing import Any

from worker.config import Settings
from worker.fleet.link import Link
from worker.supervision.fleet import FleetRow, FleetView

_AGE = "EXTRACT(EPOCH FROM now() - {})::float8"


def _open(settings: Settings) -> Link:
    return Link(settings.fleet, retry_s=5.0)


def waiting_on(settings: Settings, task_id: str) -> str | None:
    """The machine a task waits on, by its fleet claim; None if it waits nowhere."""
    link = _open(settings)
    try:
        rows = link.run(
            "SELECT machine_id FROM fleet_claims WHERE task_id = %s AND state = 'waiting'",
            (task_id,),
        )
    finally:
        link.close()
    return str(rows[0]["machine_id"]) if rows else None


def fleet_view(settings: Settings, stale_after_s: float) -> FleetView:
    """One row per machine id: its live tasks (leases), its status report, when last heard."""
    link = _open(settings)
    try:
        live = link.run(
            "SELECT machine_id, task_id FROM fleet_claims WHERE state = 'active'"
            " AND lease_until > now() ORDER BY claimed_at"
        )
        reports = link.run(
            f"SELECT machine_id, report, {_AGE.format('updated_at')} AS age FROM fleet_reports"
        )
        heard = link.run(
            f"SELECT machine_id, MIN({_AGE.format('last_seen')}) AS age FROM fleet_machines"
            " GROUP BY machine_id"
            f" UNION ALL SELECT machine_id, MIN({_AGE.format('COALESCE(ended_at, started_at)')})"
            " FROM fleet_runs WHERE started_at > now() - interval '7 days' GROUP BY machine_id"
        )  # the runs of the last week (by their index); older machines by their presence row
    finally:
        link.close()
    view = FleetView(folder=settings.fleet.shown_url(), stale_after_s=stale_after_s)
    tasks: dict[str, list[str]] = {}
    for row in live:
        tasks.setdefault(row["machine_id"], []).append(row["task_id"])
    ages: dict[str, float] = {}
    for row in [*heard, *reports]:
        ages[row["machine_id"]] = min(row["age"], ages.get(row["machine_id"], row["age"]))
    by_machine = {row["machine_id"]: row["report"] for row in reports}
    for machine in sorted(ages):
        report: dict[str, Any] = by_machine.get(machine) or {}
        own = tasks.get(machine, [])
        view.rows.append(
            FleetRow(
                machine=machine,
                file="fleet database",
                health=report.get("health"),
                state="running" if own else "idle",
                task=", ".join(own) or None,
                mode=report.get("mode") if own else None,
                iteration=report.get("iteration") if own else None,
                pace=report.get("pace"),
                context_fill=report.get("context_fill"),
                cost_usd=report.get("cost_usd"),
                updated_at=report.get("updated_at"),
                age_s=round(ages[machine], 1),
                stale=ages[machine] > stale_after_s,
                anomalies=list(report.get("last_anomalies") or []),
                stopped=report.get("stopped"),
                outcome=report.get("outcome"),
            )
        )
    return view


def fleet_log(settings: Settings, limit: int) -> dict[str, Any]:
    """The latest runs of every machine, each with its decision's reason codes."""
    link = _open(settings)
    try:
        runs = link.run(
            "SELECT r.id, r.machine_id, EXTRACT(EPOCH FROM r.started_at)::float8 AS started_at,"
            " r.task_id, r.source, r.outcome, r.reason, r.fields,"
            " (SELECT d.reason_codes FROM fleet_decisions d WHERE d.run_id = r.id"
            "  ORDER BY d.id DESC LIMIT 1) AS reason_codes"
            " FROM fleet_runs r ORDER BY r.id DESC LIMIT %s",
            (limit,),
        )
    finally:
        link.close()
    for run in runs:
        fields = run.pop("fields") or {}
        run.update(
            modes=fields.get("modes", []),
            iterations=fields.get("iterations", 0),
            cost_usd=fields.get("cost_usd", 0.0),
            reason_codes=run["reason_codes"] or fields.get("reason_codes", []),
        )
    return {"database": settings.fleet.shown_url(), "runs": runs}


def fleet_status(settings: Settings) -> dict[str, Any]:
    """Per machine: the tasks it runs and the tasks waiting on it (claims), its last run."""
    link = _open(settings)
    try:
        claims = link.run(
            f"SELECT machine_id, task_id, source, state, {_AGE.format('claimed_at')} AS age,"
            " lease_until > now() AS live FROM fleet_claims"
            " WHERE state IN ('active', 'waiting') ORDER BY claimed_at"
        )
        last = link.run(
            "SELECT DISTINCT ON (machine_id) machine_id, id, task_id, outcome,"
            f" {_AGE.format('started_at')} AS age FROM fleet_runs"
            " WHERE started_at > now() - interval '7 days' ORDER BY machine_id, id DESC"
        )
    finally:
        link.close()
    machines: dict[str, dict[str, Any]] = {
        row["machine_id"]: {"machine": row["machine_id"], "running": [], "waiting": []}
        for row in last
    }
    for row in claims:
        entry = machines.setdefault(
            row["machine_id"], {"machine": row["machine_id"], "running": [], "waiting": []}
        )
        if row["state"] == "waiting":
            entry["waiting"].append(row["task_id"])
        elif row["live"]:
            entry["running"].append(row["task_id"])
    for row in last:
        machines[row["machine_id"]]["last_run"] = {
            key: row[key] for key in ("id", "task_id", "outcome", "age")
        }
    return {
        "database": settings.fleet.shown_url(),
        "machines": [machines[name] for name in sorted(machines)],
    }
