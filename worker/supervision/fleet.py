"""`worker fleet`: every machine's status report side by side, stale ones flagged.

A report that cannot be read is a row naming the file and what is wrong with it; the other
machines are still shown.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from worker.supervision.reports import SUFFIX, read_report, report_files


@dataclass
class FleetRow:
    machine: str
    file: str
    health: str | None = None
    state: str | None = None
    task: str | None = None
    mode: str | None = None
    iteration: int | None = None
    pace: str | None = None
    context_fill: float | None = None
    cost_usd: float | None = None
    updated_at: str | None = None
    age_s: float | None = None
    stale: bool = False
    anomalies: list[str] = field(default_factory=list)
    stopped: str | None = None
    outcome: str | None = None
    error: str | None = None  # the report could not be read: why


@dataclass
class FleetView:
    folder: str
    stale_after_s: float
    rows: list[FleetRow] = field(default_factory=list)

    @property
    def stale(self) -> list[str]:
        return [row.machine for row in self.rows if row.stale]

    @property
    def malformed(self) -> list[str]:
        return [row.file for row in self.rows if row.error]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["stale"] = self.stale
        data["malformed"] = self.malformed
        return data


def fleet_view(folder: Path, stale_after_s: float, now: datetime) -> FleetView:
    """Read every `*_latest.json` in `folder` (which may not exist yet: no machines)."""
    view = FleetView(folder=str(folder), stale_after_s=stale_after_s)
    for path in report_files(folder):
        name = path.name[: -len(SUFFIX)]
        try:
            report = read_report(path)
        except ValueError as exc:
            view.rows.append(FleetRow(machine=name, file=path.name, error=str(exc)))
            continue
        age = (now - report.updated_at).total_seconds()
        view.rows.append(
            FleetRow(
                machine=report.machine_id,
                file=path.name,
                health=report.health,
                state=report.state,
                task=report.task_id,
                mode=report.mode,
                iteration=report.iteration,
                pace=report.pace,
                context_fill=report.context_fill,
                cost_usd=report.cost_usd,
                updated_at=report.updated_at.isoformat(timespec="seconds"),
                age_s=round(age, 1),
                stale=age > stale_after_s,
                anomalies=report.last_anomalies,
                stopped=report.stopped,
                outcome=report.outcome,
            )
        )
    return view
