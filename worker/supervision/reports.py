"""Per-machine status reports: `<reports>/<machine-id>_latest.json`, and reading them back.

The reports folder may be shared between machines (a synced drive, a network share): each
machine writes only its own file, atomically (temporary file in the same folder, fsync,
os.replace), so a reader never sees half a report. Readers skip temporary files and name a
malformed report instead of failing on it.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worker.state.fsutil import atomic_write_text

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
SUFFIX = "_latest.json"
Health = Literal["green", "amber", "red"]
_RANK = {"green": 0, "amber": 1, "red": 2}
_BY_RANK: tuple[Health, ...] = ("green", "amber", "red")


class StatusReport(BaseModel):
    """What one machine is doing, as of `updated_at` (the spec's SALUTE report)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    machine_id: str = Field(min_length=1)
    run_id: int | None = None
    state: Literal["running", "finished"] = "running"
    health: Health = "green"  # the worse of the loop's and the supervisor's assessments
    loop_health: Health = "green"  # what the iteration's own outcome says
    supervisor_health: Health | None = None  # only when it differs from loop_health
    task_id: str | None = None
    task_title: str | None = None
    task_source: str | None = None
    mode: str | None = None
    model: str | None = None
    iteration: int = 0
    max_iterations: int | None = None
    escalations: int = 0
    pace: str = "primary"
    last_anomalies: list[str] = Field(default_factory=list)
    stopped: str | None = None
    outcome: str | None = None
    context_fill: float | None = None
    context_tokens: int | None = None
    context_window: int | None = None
    cost_usd: float = 0.0
    started_at: datetime
    updated_at: datetime
    elapsed_s: float = 0.0


def worst(*levels: str) -> Health:
    rank = max(_RANK.get(level, 0) for level in levels)
    return _BY_RANK[rank]


def report_path(folder: Path, machine_id: str) -> Path:
    return folder / f"{machine_id}{SUFFIX}"


def write_report(folder: Path, report: StatusReport) -> Path:
    """Validate, then write atomically; returns the report's path. Raises OSError."""
    data = StatusReport.model_validate(report.model_dump()).model_dump_json(indent=2)
    target = report_path(folder, report.machine_id)
    atomic_write_text(target, data + "\n")  # with the retry a synced folder needs on Windows
    return target


def read_report(path: Path) -> StatusReport:
    """Read one report; raises ValueError naming what is wrong with it."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read it: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at line {exc.lineno}") from exc
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(f"schema_version {version!r} is not {SCHEMA_VERSION}")
    try:
        return StatusReport.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(root)"
        raise ValueError(f"{where}: {first['msg']}") from exc


def report_files(folder: Path) -> list[Path]:
    """Every machine's report in the folder (temporary files and conflicted copies skipped)."""
    if not folder.is_dir():
        return []
    return sorted(
        path
        for path in folder.glob(f"*{SUFFIX}")
        if not path.name.startswith(".") and path.is_file()
    )


def now_utc() -> datetime:
    return datetime.now(UTC)
