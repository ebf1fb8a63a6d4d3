"""gather -> act -> verify: one task driven through its modes until a terminal status.

`continue` runs another iteration; `success` and `failure` end the task; `escalate`, a
failure below the top mode and `maxIterations` without a terminal status move to the next
mode with the count starting over; `wait` saves a wait state. Caps: wall clock and cost.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from worker.agents.infra import layers, missing_binary
from worker.agents.registry import adapter_for, permission_args, resumes_sessions
from worker.config import Settings
from worker.errors import WorkerError
from worker.models import (
    AgentEvent,
    AgentRequest,
    AgentResult,
    InfraKind,
    Outcome,
    StatusBlock,
    Task,
    TaskResult,
)
from worker.modes import Mode, ModeSet
from worker.process.workspace_git import changed_files, diff_digest, save_diff
from worker.run.costs import DAILY_BUDGET_REACHED, daily_cap_reached, save_budget_wait
from worker.run.infra import infra_end
from worker.run.iteration import (
    budget_left,
    escalation_code,
    record_iteration,
    task_cost_cap,
    verify,
    verify_checks,
)
from worker.run.prompt import PromptParts, build_prompt
from worker.run.slots import share_usage_limit, shared_usage_wait
from worker.sandbox import cli_home
from worker.state.store import Store
from worker.supervision.protocol import IterationView, NullSupervisor, TaskSupervisor
from worker.waits.saving import WaitPoint, save_agent_wait, save_usage_wait

log = logging.getLogger(__name__)

# The same call failing with the same error 3 times (OpenHands; SWE-agent requeries 3) means
# the agent, not the task, is broken.
_SAME_ERROR_LIMIT = 3


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


def run_task(ctx: LoopContext, task: Task, start: StartPoint) -> TaskResult:
    """Drive `task` from `start` through its modes until it ends, waits or is stopped.

    An unexpected error once an agent has been paid in this run ends the task as a failure
    that says what failed (WORKER_FAILED_AFTER_AGENT): the agent's work stays, and the task is
    not taken again for the next run to pay the agent for the same failure. Before any call,
    the error goes up and the claim's lease brings the task back."""
    run = _TaskRun(ctx, task, start)
    try:
        return run.run()
    except Exception as exc:
        if not run.called:
            raise
        log.exception("task %s: worker failed after the agent ran", task.id)
        what = f"{type(exc).__name__}: {exc}"[:500]
        return run.finish(
            Outcome.FAILURE,
            f"worker failed after the agent ran ({what}); the agent's work is kept",
            "WORKER_FAILED_AFTER_AGENT",
        )


class _TaskRun:
    """One task's run: the state kept between iterations, and the steps of each one."""

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

    def run(self) -> TaskResult:
        """Iterations of gather -> act -> verify -> decide what comes next, until one ends it."""
        while True:
            # --model, else the model a resumed task waited with (in its mode), else the mode's.
            start = self.start
            self.model = (
                self.ctx.forced_model
                or (start.model if self.mode.id == start.mode else None)
                or self.mode.model
            )
            ended = self.limits_reached()
            if ended is not None:
                return ended
            request, label = self.gather()
            agent, duration = self.act(request, label)
            ended = self.unavailable(agent, label)
            if ended is not None:
                return ended
            status = self.verify(agent, label, duration)
            ended = self.decide_next(agent, status)
            if ended is not None:
                return ended

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

    def limits_reached(self) -> TaskResult | None:
        """A stop request, the task's cost cap or the daily spend cap, before another call."""
        if self.ctx.stop_event.is_set():
            return self.finish(Outcome.STOPPED, "stop requested; work kept", "STOP_REQUESTED")
        # Checked before each call: a resumed task, or one escalated to a mode with a lower
        # cap, may have spent its budget already.
        cost_cap = task_cost_cap(self.settings, self.mode)
        if self.result.cost_usd >= cost_cap:
            return self.finish(
                Outcome.FAILURE, f"the task's cost cap (${cost_cap:.2f}) was reached", "COST_CAP"
            )
        shared = shared_usage_wait(self.settings, self.ctx.store, self.wait_point)
        if shared is not None:  # another slot's agent hit the usage limit
            self.result.wait_state = shared
            return self.finish(Outcome.WAITING, "agent usage limit reached", "USAGE_LIMIT")
        spent = daily_cap_reached(self.settings, self.ctx.store)
        if spent is not None:
            self.result.wait_state = save_budget_wait(self.settings, self.wait_point(""), spent)
            return self.finish(
                Outcome.WAITING, "the daily spend cap is reached", DAILY_BUDGET_REACHED
            )
        return None

    def prompt(self, resuming: bool) -> str:
        """A follow-up for a resumed session that holds this mode's briefing, else the
        briefing: everything again (a new session, a new mode, an agent that cannot resume)."""
        ctx = self.ctx
        follow_up = resuming and self.briefed == self.mode.id
        parts = PromptParts(
            task=self.task,
            mode=self.mode.id,
            iteration=self.iteration,
            max_iterations=self.limit,
            # A resumed session holds its last answer: quoted only for a new one.
            previous_output="" if resuming else self.previous_output,
            previous_reason="" if resuming else self.previous.reason,
            steering=self.steering,
            sections=ctx.sections,
            resume_answer=self.answer,
            checks_report=self.new_checks if follow_up else ctx.checks_report,
            follow_up=follow_up,
            remind_status=self.seq > 0 and self.previous.status is None,
            changed_sections=ctx.section_changes,
        )
        return build_prompt(parts)

    def gather(self) -> tuple[AgentRequest, str]:
        """The prompt and the agent call for this iteration, and its label for progress."""
        ctx, settings, mode = self.ctx, self.settings, self.mode
        resuming = self.session_id is not None and resumes_sessions(settings, mode)
        prompt = self.prompt(resuming)
        # Told once: the next prompts carry only what is new after them.
        self.new_checks, ctx.section_changes = "", []
        self.seq += 1
        request = AgentRequest(
            prompt=prompt,
            model=self.model,
            cwd=ctx.cwd,
            # An iteration never outlives the task's wall-clock cap.
            timeout_s=_timeout(settings, mode, time.monotonic() - self.started),
            log_path=self.run_logs / f"iteration-{self.seq}.jsonl",
            resume_session=self.session_id if resuming else None,
            extra_args=permission_args(mode),
            stop=ctx.stop_event,
            on_start=ctx.on_agent_start,
            max_budget_usd=budget_left(mode, task_cost_cap(settings, mode), self.result.cost_usd),
            env=cli_home.prepare(mode.agent, ctx.cli_folder, os.environ) if ctx.cli_folder else {},
        )
        return request, f"{mode.id} ({self.model}) iteration {self.iteration}/{self.limit}"

    @property
    def run_logs(self) -> Path:
        return self.settings.logs / f"run-{self.ctx.run_id}"

    def act(self, request: AgentRequest, label: str) -> tuple[AgentResult, float]:
        """Run the agent; its cost, session and final text join the task's."""
        ctx, result = self.ctx, self.result
        ctx.progress.step(
            self.mode.id, self.model, self.iteration, self.limit, self.seq, result.cost_usd
        )
        ctx.progress.start(f"{label}: running")
        t0 = time.monotonic()
        agent = _run_agent(ctx, self.mode, request, label, t0)
        self.called = True
        if agent.session_missing and self.session_id:
            # The CLI lost the session (claude-code issues): start fresh, same iteration.
            result.reason_codes.append("SESSION_MISSING_FRESH_START")
            self.session_id = self.briefed = None
            fresh = dataclasses.replace(request, prompt=self.prompt(False), resume_session=None)
            agent = _run_agent(ctx, self.mode, fresh, label, t0)
        duration = time.monotonic() - t0
        result.cost_usd += agent.cost_usd
        if agent.session_id:
            # The session holds this mode's briefing: sent now, or held since.
            self.briefed = self.mode.id
        self.session_id = agent.session_id or self.session_id
        result.final_text = agent.final_text
        ctx.renew()
        # A CLI error the adapter did not classify, repeating across sessions (the supervisor's
        # `cli_error` finding), is the infrastructure's failure too.
        agent.infra = agent.infra or ctx.supervisor.infra_failure()
        return agent, duration

    def unavailable(self, agent: AgentResult, label: str) -> TaskResult | None:
        """An infrastructure failure or a usage limit: not the task's failure."""
        result, start = self.result, self.start
        if agent.infra is not None:
            # Released as it was, or a timed wait (worker/run/infra.py). An answer
            # the model never read is kept for the retry (the first one, if the
            # outage outlasted a wait already).
            unread = (start.pending_answer or self.answer) if self.answer is not None else None
            point = self.wait_point(agent.final_text)
            end = infra_end(self.settings, agent.infra, point, start.unavailable_hits, unread)
            if end is not None:
                self.ctx.progress.stop(f"{label}: {agent.infra.message}")
                result.infra, result.wait_state = agent.infra, end.wait_state
                return self.finish(end.outcome, end.reason, end.code)
        if agent.usage_limit_hit or (agent.infra and agent.infra.kind is InfraKind.USAGE_LIMIT):
            self.ctx.progress.stop(f"{label}: usage limit reached; waiting for the reset")
            limit = (agent.rate_limited_until, start.usage_limit_hits)
            share_usage_limit(self.settings, self.ctx.store, *limit)  # every slot waits
            result.wait_state = save_usage_wait(
                self.settings,
                self.wait_point(agent.final_text),
                agent.rate_limited_until,
                start.usage_limit_hits,
            )
            return self.finish(Outcome.WAITING, "agent usage limit reached", "USAGE_LIMIT")
        return None

    def verify(self, agent: AgentResult, label: str, duration: float) -> StatusBlock:
        """The iteration's status (STATUS block, then the task's checks), recorded, and the
        supervisor's steering for the next prompt."""
        ctx = self.ctx
        status, failing = verify_checks(
            verify(agent), ctx.checks, ctx.cwd, self.settings, self.run_logs
        )
        if failing is not None:
            ctx.checks_report = self.new_checks = failing
        record = record_iteration(
            ctx.store,
            ctx.run_id,
            self.seq,
            mode=self.mode.id,
            model=self.model,
            iteration=self.iteration,
            status=status,
            agent=agent,
            duration_s=duration,
        )
        self.result.iterations.append(record)
        ctx.progress.stop(
            f"{label}: {record.status} ({duration:.1f}s, {agent.input_tokens + agent.output_tokens}"
            f" tokens, ${agent.cost_usd:.4f})"
        )
        if not isinstance(ctx.supervisor, NullSupervisor):
            self.steering = ctx.supervisor.after_iteration(self.view(agent, status))
            record.steering = self.steering
            if self.steering:
                ctx.progress.finding(self.steering[-1])
        return status

    def view(self, agent: AgentResult, status: StatusBlock) -> IterationView:
        return IterationView(
            task=self.task,
            mode=self.mode.id,
            model=self.model,
            iteration=self.iteration,
            max_iterations=self.limit,
            escalations=self.escalations,
            result=agent,
            status=status,
            changed_files=changed_files(self.ctx.cwd),
            diff_digest=diff_digest(self.ctx.cwd),
            cost_so_far=self.result.cost_usd,
        )

    def decide_next(self, agent: AgentResult, status: StatusBlock) -> TaskResult | None:
        """The task's end after this iteration, or None when another iteration runs (in this
        mode or a stronger one)."""
        emergency = agent.stopped if (agent.stopped or "").startswith("supervisor") else None
        ended = self.stopped(agent, emergency)
        if ended is None:
            ended = self.repeated_error(agent, status)
        if ended is not None:
            return ended
        self.answer = None
        self.previous, self.previous_output = status, agent.final_text
        state = status.status
        if state == "success":
            return self.finish(
                Outcome.SUCCESS, status.reason or "the agent reported success", "AGENT_SUCCESS"
            )
        if state == "wait":
            return self.agent_wait(agent, status)
        escalate_code = escalation_code(state, emergency, self.iteration, self.limit)
        if time.monotonic() - self.started >= self.settings.task_wall_clock_s:
            return self.finish(
                Outcome.FAILURE, "the task's wall-clock cap was reached", "WALL_CLOCK_CAP"
            )
        if escalate_code is None:
            self.iteration += 1
            if state is None or status.reason_code:
                self.result.reason_codes.append(status.reason_code or "NO_STATUS_BLOCK")
            return None
        return self.escalate(status, escalate_code, emergency)

    def agent_wait(self, agent: AgentResult, status: StatusBlock) -> TaskResult:
        """The agent asked to wait: its wait state saved. A wait that cannot be saved (its
        folder unwritable, the disk full) ends the task as a failure that says what failed: the
        work stays, and no later run pays the agent again for the same wait."""
        point = self.wait_point(agent.final_text)
        try:
            self.result.wait_state, codes = save_agent_wait(self.settings, point, status)
        except (OSError, WorkerError) as exc:
            asked = status.wait_for or status.reason or "a wait"
            return self.finish(
                Outcome.FAILURE,
                f"the agent asked to wait ({asked[:200]}), but its wait state could not be"
                f" saved in {self.settings.wait_states}: {exc}",
                "WAIT_NOT_SAVED",
            )
        self.result.reason_codes += codes
        return self.finish(
            Outcome.WAITING, status.reason or f"waiting for {status.wait_for}", "AGENT_WAIT"
        )

    def stopped(self, agent: AgentResult, emergency: str | None) -> TaskResult | None:
        """A stop request ends the task; a supervisor's emergency ends it at the top mode."""
        if agent.stopped and emergency is None:
            return self.finish(Outcome.STOPPED, agent.stopped, "STOP_REQUESTED")
        if emergency is not None:
            # Keep the partial work where the user can see it; the worktree (if any) is
            # committed to the task branch when the task ends.
            save_diff(self.ctx.cwd, self.run_logs / f"partial-{self.seq}.diff")
            if "PACE" in emergency or self.ctx.modes.next_mode(self.mode.id) is None:
                return self.finish(Outcome.FAILURE, emergency, "SUPERVISOR_EMERGENCY")
        return None

    def repeated_error(self, agent: AgentResult, status: StatusBlock) -> TaskResult | None:
        """The same agent error too many times in a row ends the task."""
        # An exit 0 without a result (no_result) is as broken as a non-zero exit.
        failed = agent.exit_code not in (0, None) or agent.subtype == "no_result"
        if status.reason_code == "AGENT_ERROR" and failed:
            self.same_errors = self.same_errors + 1 if status.reason == self.last_error else 1
            self.last_error = status.reason
        else:
            self.last_error, self.same_errors = "", 0
        if self.same_errors < _SAME_ERROR_LIMIT:
            return None
        # The agent CLI itself is broken (a flag it does not know, no login): neither
        # another try nor a stronger model helps, and every try may cost.
        return self.finish(
            Outcome.FAILURE,
            f"the agent failed {self.same_errors} times in a row the same way "
            f"({self.last_error}); fix the agent, then rerun the task with --task-id",
            "AGENT_REPEATED_ERROR",
        )

    def escalate(self, status: StatusBlock, code: str, emergency: str | None) -> TaskResult | None:
        """Move to the next stronger mode, the count starting over; at the top, fail."""
        mode, result = self.mode, self.result
        target = self.ctx.modes.next_mode(mode.id, status.escalate_to)
        if target is None:
            why = {
                "AGENT_ESCALATE": "the agent asked to escalate but no stronger mode is left",
                "FAILURE_ESCALATED": status.reason or "the agent reported failure",
                "MAX_ITERATIONS": f"{self.limit} iterations in {mode.id} without a terminal status",
                "SUPERVISOR_CUT_SHORT": emergency or "",
            }[code]
            top_code = "FAILURE_AT_TOP_MODE" if status.status == "failure" else f"{code}_AT_TOP"
            return self.finish(Outcome.FAILURE, why, top_code)
        result.reason_codes.append(code)
        stronger = self.ctx.modes.get(target)
        if stronger.agent != mode.agent:
            self.session_id = None  # another agent CLI cannot resume this one's session
        self.mode = stronger
        result.modes.append(stronger.id)
        self.escalations += 1
        self.iteration = 1
        return None


def _timeout(settings: Settings, mode: Mode, elapsed: float) -> float:
    wall_clock_left = settings.task_wall_clock_s - elapsed
    return max(1.0, min(mode.iteration_timeout_s or settings.iteration_timeout_s, wall_clock_left))


def _run_agent(
    ctx: LoopContext, mode: Mode, request: AgentRequest, label: str, t0: float
) -> AgentResult:
    adapter = adapter_for(ctx.settings, mode)
    tokens = [0]

    def on_event(event: AgentEvent) -> str | None:
        if ctx.stop_event.is_set():
            return "stop requested"
        if event.output_tokens:
            tokens[0] += event.output_tokens
        ctx.progress.event(event)
        ctx.progress.update(f"{label}: {time.monotonic() - t0:.0f}s, {tokens[0]} tokens out")
        stop = ctx.supervisor.on_event(event)
        if stop is not None:
            ctx.progress.finding(stop)  # said when it happens, not after the iteration
        return stop

    agent = adapter.run(request, on_event)
    if agent.not_found and agent.infra is None:
        executable = layers(adapter)[-1].command(request)[0]  # the agent's, not the box's
        agent.infra = missing_binary(mode.agent, executable, agent.stderr_tail)
    return agent
