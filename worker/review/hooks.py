"""Where the batch cycle meets reviewers, directives and the knowledge store."""

from __future__ import annotations

from worker.config import Settings
from worker.models import Task, TaskResult
from worker.store import Store


def prompt_sections(settings: Settings, store: Store, task: Task) -> list[str]:
    """Markdown sections (`## PROJECT KNOWLEDGE`, `## ACTIVE DIRECTIVES`) for a task's prompt."""
    return []


def after_task(settings: Settings, store: Store, result: TaskResult) -> None:
    """Called between tasks, after a task's report: triggers reviewers, ages directives."""
