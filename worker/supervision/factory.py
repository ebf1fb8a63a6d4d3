"""Builds the supervisor of one task from the settings."""

from __future__ import annotations

from pathlib import Path

from worker.config import Settings
from worker.models import Task
from worker.supervision.protocol import NullSupervisor, TaskSupervisor
from worker.supervision.supervisor import Supervisor


def make_supervisor(settings: Settings, task: Task, run_id: int | None) -> TaskSupervisor:
    """The supervisor for one task run; NullSupervisor when supervision is off."""
    sup = settings.supervision
    if not sup.enabled:
        return NullSupervisor()  # passthrough: nothing checked, written or injected
    return Supervisor(
        sup, task, run_id, machine_id=settings.machine_id, reports_dir=reports_folder(settings)
    )


def reports_folder(settings: Settings) -> Path:
    """The machine reports' folder: the top-level `reports_dir` (may be shared by machines)."""
    return settings.reports


def stale_after_s(settings: Settings) -> float:
    """When a machine's report counts as stale.

    A running task writes its report only between iterations, so a whole iteration timeout
    can pass in silence; twice that is the default.
    """
    own = settings.supervision.stale_after_s
    return own if own is not None else 2 * settings.iteration_timeout_s
