"""What a caller asks of one run (RunOptions) and what it gets back (RunReport)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from worker.errors import ExitCode
from worker.models import SETUP_PROBLEM, InfraKind, Outcome

if TYPE_CHECKING:  # the loop and the agents load only when a task runs
    from worker.state.progress import Display


# Neither is compared: no generated `__eq__` (one `exec` fewer each at every start).
@dataclass(eq=False)
class RunOptions:
    """What the caller asks of one run (the options of `worker run`)."""

    dry_run: bool = False
    task_id: str | None = None
    mode: str | None = None
    model: str | None = None
    use_worktree: bool = False
    open_pr: bool | None = None
    progress: Display | None = None


@dataclass(eq=False)
class RunReport:
    """What one run did, rendered as text or JSON by `worker run`."""

    outcome: Outcome
    run_id: int | None = None
    task_id: str | None = None
    source: str | None = None
    modes: list[str] = field(default_factory=list)
    iterations: int = 0
    reason: str = ""
    reason_codes: list[str] = field(default_factory=list)
    cost_usd: float = 0.0
    duration_s: float = 0.0
    branch: str | None = None
    wait_state: str | None = None
    command: list[str] | None = None
    candidates: dict[str, int] = field(default_factory=dict)
    mode_reason: str | None = None
    review_s: float = 0.0  # the reviewers after the task, not in duration_s or cost_usd
    review_cost_usd: float = 0.0
    infra: str | None = None  # the agent's infrastructure failure (InfraKind), if any
    notes: list[str] = field(default_factory=list)  # a dry run's warnings, in words
    source_errors: list[str] = field(default_factory=list)  # a dry run's, in words

    @property
    def mode(self) -> str | None:
        return self.modes[-1] if self.modes else None

    @property
    def exit_code(self) -> int:
        if self.infra in (InfraKind.AUTH, InfraKind.MISSING_BINARY):
            return ExitCode.CONFIG  # a key or the agent's path to fix; the task was left as it was
        if SETUP_PROBLEM in self.reason_codes:
            return ExitCode.CONFIG  # maintenance's checks cannot run: the set-up to fix, no agent
        return ExitCode.TASK_FAILED if self.outcome is Outcome.FAILURE else ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "task_id": self.task_id,
            "source": self.source,
            "mode": self.mode,
            "modes": self.modes,
            "iterations": self.iterations,
            "reason": self.reason,
            "reason_codes": self.reason_codes,
            "run_id": self.run_id,
            "cost_usd": round(self.cost_usd, 6),
            "duration_s": round(self.duration_s, 3),
            "branch": self.branch,
            "wait_state": self.wait_state,
            "command": self.command,
            "candidates": self.candidates,
            "mode_reason": self.mode_reason,
            "reviewers": {
                "duration_s": round(self.review_s, 3),
                "cost_usd": round(self.review_cost_usd, 6),
            },
            "infra": self.infra,
            "notes": self.notes,
            "source_errors": self.source_errors,
        }
