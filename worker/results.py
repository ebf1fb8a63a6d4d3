"""What one agent call and one task leave behind: the request to an adapter, its result, each
iteration's record and the task's result.

Apart from the domain types (`worker.models`, which still exports these four) because a run
with nothing to do never makes one: dataclasses cost their methods' compilation (one `exec`
each on Python 3.11), and these four took about 2.5 ms of every command's start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # names for mypy; worker.models loads this module at the first use
    from worker.models import AgentEvent, InfraFailure, Outcome, Task
    from worker.sandbox.box import Sandbox


@dataclass(frozen=True)
class AgentRequest:
    """What one iteration asks of an agent adapter."""

    prompt: str
    model: str
    cwd: Path
    timeout_s: float
    log_path: Path | None = None
    resume_session: str | None = None
    extra_args: tuple[str, ...] = ()
    max_budget_usd: float | None = None
    # Set by the worker to end the agent at once (a stop order, SIGTERM to `worker serve`).
    stop: threading.Event | None = field(default=None, compare=False)
    # Told the agent's pid (= its process group) once it runs: recorded on the task's claim.
    on_start: Callable[[int], None] | None = field(default=None, compare=False)
    # The box the agent runs in (worker/sandbox/box.py), set by the adapter the registry hands out.
    sandbox: Sandbox | None = field(default=None, compare=False)
    # Variables the agent gets on top of the usual environment: the CLI's own folder for a task
    # from an untrusted source (worker/sandbox/cli_home.py).
    env: dict[str, str] = field(default_factory=dict, compare=False)


@dataclass
class AgentResult:
    """What one agent invocation did, read from its events and its exit."""

    exit_code: int | None
    final_text: str = ""
    events: list[AgentEvent] = field(default_factory=list)
    session_id: str | None = None
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    num_turns: int = 0
    is_error: bool = False
    subtype: str | None = None
    timed_out: bool = False
    stopped: str | None = None  # why the worker stopped the agent early (supervisor, cancel)
    rate_limited_until: float | None = None  # epoch seconds when a usage limit was hit
    usage_limit_hit: bool = False
    session_missing: bool = False  # `--resume` named a session the CLI no longer has
    not_found: bool = False  # the agent executable could not be started
    error: str | None = None  # the CLI's own error message, when it gave one
    stderr_tail: str = ""
    truncated: bool = False
    infra: InfraFailure | None = None  # set when the failure was not the task's
    sandbox: str | None = None  # the runtime the agent ran in (srt, bwrap), None: unboxed
    sandbox_refusals: list[str] = field(default_factory=list)  # what the box refused, as seen


@dataclass
class IterationRecord:
    """One iteration of a task: its mode and model, STATUS, cost, tokens and steering."""

    mode: str
    model: str
    iteration: int  # 1-based within its mode
    status: str
    reason: str
    reason_code: str | None
    duration_s: float
    cost_usd: float
    input_tokens: int
    output_tokens: int
    exit_code: int | None
    steering: list[str] = field(default_factory=list)


@dataclass
class TaskResult:
    """The end of one task run: what the reports and the run record say."""

    task: Task
    outcome: Outcome
    reason: str = ""
    reason_codes: list[str] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)
    iterations: list[IterationRecord] = field(default_factory=list)
    duration_s: float = 0.0
    cost_usd: float = 0.0
    session_id: str | None = None
    branch: str | None = None
    wait_state: Path | None = None
    final_text: str = ""
    anomalies: list[str] = field(default_factory=list)
    review_s: float = 0.0  # the reviewers after the task: their time and cost, kept apart
    review_cost_usd: float = 0.0
    infra: InfraFailure | None = None  # the task ended on an infrastructure failure
    # The pull request the report opened or found (`number`, `url`, `head`), when one did.
    pull_request: dict[str, Any] | None = None
    # A task ended without an agent run of its own (its pull request merged or closed): the
    # iterations of all its runs, for its report (`iterations` holds this run's, none).
    iterations_total: int | None = None
    # A resumed round of a pull request: what it was asked to fix (checks, reviews), for the
    # reply worker leaves on the pull request.
    answered: str = ""

    @property
    def mode(self) -> str | None:
        return self.modes[-1] if self.modes else None

    def record(self) -> dict[str, Any]:
        """The task's end as the run's record keeps it (`Store.record_result`, `finish_run`)."""
        return {
            "task_id": self.task.id,
            "source": self.task.source,
            "outcome": self.outcome.value,
            "reason": self.reason[:1000],
            "modes": self.modes,
            "iterations": len(self.iterations),
            "cost_usd": self.cost_usd,
            "branch": self.branch,
            "reason_codes": self.reason_codes,
        }
