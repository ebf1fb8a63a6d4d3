"""The TaskSource protocol: where tasks come from and where their outcomes go back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from worker.models import Task

if TYPE_CHECKING:
    from worker.results import TaskResult


@dataclass
class Skipped:
    task_id: str
    reason_code: str  # e.g. NOT_ADDRESSED_TO_US, UNTRUSTED_TRIGGER, ALREADY_CLAIMED
    detail: str = ""


@dataclass
class Listing:
    """What one source offers this run, best first, and what it passed over and why."""

    source: str
    tasks: list[Task] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class TaskSource(Protocol):
    name: str

    def list(self) -> Listing:
        """Cheap look at what is available; no claims, no writes."""
        ...

    def find(self, task_id: str) -> Task | None:
        """The task with this id, whatever its state (for `--task-id`)."""
        ...

    def claim(self, task: Task, run_id: int) -> bool:
        """Take the task atomically; False when another run or machine has it."""
        ...

    def renew(self, task: Task) -> None:
        """Extend the claim's lease while the task runs."""
        ...

    def release(self, task: Task, result: TaskResult) -> None:
        """End the claim: done, failed, waiting, or available again (stopped)."""
        ...

    def report(self, task: Task, result: TaskResult) -> None:
        """Tell the task's requester how it ended (idempotent)."""
        ...
