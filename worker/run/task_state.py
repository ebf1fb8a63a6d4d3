"""One task's run as it stands between iterations: where it starts (`StartPoint`), what it runs
with (`LoopContext`, `Progress`), the state its iterations share (`TaskState`) and the two
ways out of it that every step uses: its end (`finish`) and where it stands for a wait state
(`wait_point`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from worker.config import Settings
from worker.models import AgentEvent, Outcome, StatusBlock, Task, TaskResult
from worker.modes import ModeSet
from worker.state.store import Store
from worker.supervision.protocol import NullSupervisor, TaskSupervisor
from worker.waits.saving import WaitPoint


class Progress(Protocol):
    def start(self, text: str) -> None: ...
    def update(self, text: str) -> None: ...
    def stop(self, text: str) -> None: ...
    # worker.state.progress.Tracker: the heartbeat `worker status` and the live display read
    def step(
        self, mode: str, model: str, iteration: int, limit: int, seq: int, cost: float
    ) -> None: ...
    def event(self, event: AgentEvent) -> None: ...
    def finding(self, text: str) -> None: ...


class _Quiet:
    def start(self, text: str) -> None: ...
    def update(self, text: str) -> None: ...
    def stop(self, text: str) -> None: ...
    def step(
        self, mode: str, model: str, iteration: int, limit: int, seq: int, cost: float
    ) -> None: ...
    def event(self, event: AgentEvent) -> None: ...
    def finding(self, text: str) -> None: ...


@dataclass
class StartPoint:
    """Where a task run begins: a fresh start, or restored from a wait state."""

    mode: str
    iteration: int = 1
    session_id: str | None = None
    resume_answer: str | None = None
    modes_used: list[str] = field(default_factory=list)
    cost_so_far: float = 0.0
    usage_limit_hits: int = 0
    unavailable_hits: int = 0  # timed waits in a row for an unavailable model API
    pending_answer: str | None = None  # the answer an outage kept from the model
    model: str | None = None  # the model the task was waiting with (restored on resume)
    session_mode: str | None = None  # the mode whose briefing `session_id` holds (a wait's)


@dataclass
class LoopContext:
    settings: Settings
    modes: ModeSet
    store: Store
    run_id: int
    cwd: Path
    supervisor: TaskSupervisor = field(default_factory=NullSupervisor)
    progress: Progress = field(default_factory=_Quiet)
    forced_model: str | None = None
    stop_event: threading.Event = field(default_factory=threading.Event)
    sections: list[str] = field(default_factory=list)
    # What changed in the sections since a restored session got them (a new directive).
    section_changes: list[str] = field(default_factory=list)
    renew: Callable[[], None] = lambda: None
    on_agent_start: Callable[[int], None] = lambda pid: None
    checks: list[str] = field(default_factory=list)  # verify: commands that must pass
    checks_report: str = ""
    # The task's own CLI folders (a task from an untrusted source); None: the shared ones.
    cli_folder: Path | None = None


class TaskState:
    """One task's run: the state kept between iterations, and its end."""

    def __init__(self, ctx: LoopContext, task: Task, start: StartPoint) -> None:
        self.ctx, self.task, self.start, self.settings = ctx, task, start, ctx.settings
        self.started = time.monotonic()
        self.result = TaskResult(
            task=task,
            outcome=Outcome.FAILURE,
            modes=list(start.modes_used),
            cost_usd=start.cost_so_far,
        )
        self.mode = ctx.modes.get(start.mode)
        self.model = ""
        self.iteration = start.iteration
        self.session_id = start.session_id
        self.answer = start.resume_answer
        self.previous = StatusBlock(status=None)
        self.previous_output = ""
        self.steering: list[str] = []
        # The mode whose briefing the session holds (None: no session holds one yet), and the
        # failing checks found since the last prompt (a new fact for a follow-up).
        self.briefed = (start.session_mode or start.mode) if start.session_id else None
        self.new_checks = ""
        self.escalations = 0
        self.last_error, self.same_errors = "", 0
        self.seq = 0
        self.called = False  # an agent was called (and paid) in this run
        if not self.result.modes or self.result.modes[-1] != self.mode.id:
            self.result.modes.append(self.mode.id)

    def finish(self, outcome: Outcome, reason: str, *codes: str) -> TaskResult:
        result = self.result
        result.outcome = outcome
        result.reason = reason
        result.reason_codes.extend(codes)
        result.duration_s = time.monotonic() - self.started
        result.session_id = self.session_id
        result.anomalies = self.ctx.supervisor.finish(outcome.value)
        return result

    def wait_point(self, final_text: str) -> WaitPoint:
        """Where the task stands now, for a wait state."""
        return WaitPoint(
            self.task,
            self.mode.id,
            self.model,
            self.iteration,
            final_text,
            self.session_id,
            self.result.modes,
            self.result.cost_usd,
        )

    @property
    def limit(self) -> int:
        return self.mode.iterations_before_escalation

    @property
    def run_logs(self) -> Path:
        return self.settings.logs / f"run-{self.ctx.run_id}"
