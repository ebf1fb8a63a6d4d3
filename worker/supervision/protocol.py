"""How the task loop talks to the supervisor; the loop knows nothing else of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from worker.models import AgentEvent, AgentResult, InfraFailure, StatusBlock, Task


@dataclass
class IterationView:
    """What the loop tells the supervisor after each iteration."""

    task: Task
    mode: str
    model: str
    iteration: int  # 1-based within the mode
    max_iterations: int
    escalations: int  # mode switches so far in this task
    result: AgentResult
    status: StatusBlock
    changed_files: list[str] = field(default_factory=list)  # workspace progress since last time
    cost_so_far: float = 0.0
    # A digest of the work tree's diff (e.g. sha256 of `git diff HEAD` plus untracked names);
    # `changed_files` alone cannot show a file changed again. None: not measured.
    diff_digest: str | None = None


class TaskSupervisor(Protocol):
    def on_event(self, event: AgentEvent) -> str | None:
        """Watch one event while the agent runs; a returned reason stops it (emergency)."""
        ...

    def after_iteration(self, view: IterationView) -> list[str]:
        """Judge the iteration; return the `[SUPERVISOR]` steering lines for the next prompt."""
        ...

    def infra_failure(self) -> InfraFailure | None:
        """An agent CLI failing the same way session after session (a bad key, a usage limit,
        an API that is down): the infrastructure's fault, not the task's. None otherwise."""
        ...

    def finish(self, outcome: str) -> list[str]:
        """The task ended; return the anomalies seen (for the reports)."""
        ...


class NullSupervisor:
    """Supervision off: nothing is checked, written or injected."""

    def on_event(self, event: AgentEvent) -> str | None:
        return None

    def after_iteration(self, view: IterationView) -> list[str]:
        return []

    def infra_failure(self) -> InfraFailure | None:
        return None

    def finish(self, outcome: str) -> list[str]:
        return []
