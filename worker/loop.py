"""gather -> act -> verify: one task driven through its modes until a terminal status.

`continue` runs another iteration; `success` and `failure` end the task; `escalate`, a
failure below the top mode and `maxIterations` without a terminal status move to the next
mode with the count starting over; `wait` saves a wait state. Caps: wall clock and cost.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from worker.agents.infra import missing_binary
from worker.agents.registry import adapter_for, permission_args
from worker.config import Settings
from worker.costs import DAILY_BUDGET_REACHED, daily_cap_reached, save_budget_wait
from worker.infra import infra_end
from worker.iteration import (
    budget_left,
    escalation_code,
    record_iteration,
    task_cost_cap,
    verify,
    verify_checks,
)
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
from worker.prompt import PromptParts, build_prompt
from worker.store import Store
from worker.supervision.protocol import IterationView, NullSupervisor, TaskSupervisor
from worker.waits.saving import WaitPoint, save_agent_wait, save_usage_wait
from worker.workspace_git import changed_files, diff_digest, save_diff

# The same call failing with the same error 3 times (OpenHands; SWE-agent requeries 3) means
# the agent, not the task, is broken.
_SAME_ERROR_LIMIT = 3


class Progress(Protocol):
    def start(self, text: str) -> None: ...
    def update(self, text: str) -> None: ...
    def stop(self, text: str) -> None: ...
    # worker.progress.Tracker: the heartbeat `worker status` and the live display read
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
    renew: Callable[[], None] = lambda: None
    on_agent_start: Callable[[int], None] = lambda pid: None
    checks: list[str] = field(default_factory=list)  # verify: commands that must pass
    checks_report: str = ""


def run_task(ctx: LoopContext, task: Task, start: StartPoint) -> TaskResult:
    settings = ctx.settings
    started = time.monotonic()
    result = TaskResult(
        task=task, outcome=Outcome.FAILURE, modes=list(start.modes_used), cost_usd=start.cost_so_far
    )
    mode = ctx.modes.get(start.mode)
    iteration = start.iteration
    session_id = start.session_id
    answer = start.resume_answer
    previous = StatusBlock(status=None)
    previous_output = ""
    steering: list[str] = []
    escalations = 0
    last_error, same_errors = "", 0
    seq = 0
    if not result.modes or result.modes[-1] != mode.id:
        result.modes.append(mode.id)

    def finish(outcome: Outcome, reason: str, *codes: str) -> TaskResult:
        result.outcome = outcome
        result.reason = reason
        result.reason_codes.extend(codes)
        result.duration_s = time.monotonic() - started
        result.session_id = session_id
        result.anomalies = ctx.supervisor.finish(outcome.value)
        return result

    def wait_point() -> WaitPoint:
        """Where the task stands now, for a wait state (read when called, in the loop)."""
        return WaitPoint(
            task,
            mode.id,
            model,
            iteration,
            agent.final_text,
            session_id,
            result.modes,
            result.cost_usd,
        )

    while True:
        if ctx.stop_event.is_set():
            return finish(Outcome.STOPPED, "stop requested; work kept", "STOP_REQUESTED")
        # Checked before each call: a resumed task, or one escalated to a mode with a lower
        # cap, may have spent its budget already.
        cost_cap = task_cost_cap(settings, mode)
        if result.cost_usd >= cost_cap:
            return finish(
                Outcome.FAILURE, f"the task's cost cap (${cost_cap:.2f}) was reached", "COST_CAP"
            )
        model = ctx.forced_model or (start.model if mode.id == start.mode else None) or mode.model
        spent = daily_cap_reached(settings, ctx.store)
        if spent is not None:
            point = WaitPoint(
                task, mode.id, model, iteration, "", session_id, result.modes, result.cost_usd
            )
            result.wait_state = save_budget_wait(settings, point, spent)
            return finish(Outcome.WAITING, "the daily spend cap is reached", DAILY_BUDGET_REACHED)
        limit = mode.iterations_before_escalation
        prompt = build_prompt(
            PromptParts(
                task=task,
                mode=mode.id,
                iteration=iteration,
                max_iterations=limit,
                previous_output=previous_output,
                previous_reason=previous.reason,
                steering=steering,
                sections=ctx.sections,
                resume_answer=answer,
                checks_report=ctx.checks_report,
            )
        )
        seq += 1
        request = AgentRequest(
            prompt=prompt,
            model=model,
            cwd=ctx.cwd,
            # An iteration never outlives the task's wall-clock cap.
            timeout_s=_timeout(settings, mode, time.monotonic() - started),
            log_path=settings.logs / f"run-{ctx.run_id}" / f"iteration-{seq}.jsonl",
            resume_session=session_id,
            extra_args=permission_args(mode),
            stop=ctx.stop_event,
            on_start=ctx.on_agent_start,
            max_budget_usd=budget_left(mode, cost_cap, result.cost_usd),
        )
        label = f"{mode.id} ({model}) iteration {iteration}/{limit}"
        ctx.progress.step(mode.id, model, iteration, limit, seq, result.cost_usd)
        ctx.progress.start(f"{label}: running")
        t0 = time.monotonic()
        agent = _act(ctx, mode, request, label, t0)
        if agent.session_missing and session_id:
            # The CLI lost the session (claude-code issues): start fresh, same iteration.
            result.reason_codes.append("SESSION_MISSING_FRESH_START")
            session_id = None
            agent = _act(ctx, mode, dataclasses.replace(request, resume_session=None), label, t0)
        duration = time.monotonic() - t0
        result.cost_usd += agent.cost_usd
        session_id = agent.session_id or session_id
        result.final_text = agent.final_text
        ctx.renew()

        # A CLI error the adapter did not classify, repeating across sessions (the supervisor's
        # `cli_error` finding), is the infrastructure's failure too.
        agent.infra = agent.infra or ctx.supervisor.infra_failure()
        if agent.infra is not None:
            # Not the task's failure: released as it was, or a timed wait (worker/infra.py).
            # An answer the model never read is kept for the retry (the first one, if the
            # outage outlasted a wait already).
            unread = (start.pending_answer or answer) if answer is not None else None
            end = infra_end(settings, agent.infra, wait_point(), start.unavailable_hits, unread)
            if end is not None:
                ctx.progress.stop(f"{label}: {agent.infra.message}")
                result.infra, result.wait_state = agent.infra, end.wait_state
                return finish(end.outcome, end.reason, end.code)
        if agent.usage_limit_hit or (agent.infra and agent.infra.kind is InfraKind.USAGE_LIMIT):
            ctx.progress.stop(f"{label}: usage limit reached; waiting for the reset")
            result.wait_state = save_usage_wait(
                settings, wait_point(), agent.rate_limited_until, start.usage_limit_hits
            )
            return finish(Outcome.WAITING, "agent usage limit reached", "USAGE_LIMIT")

        status, failing = verify_checks(
            verify(agent), ctx.checks, ctx.cwd, settings, settings.logs / f"run-{ctx.run_id}"
        )
        if failing is not None:
            ctx.checks_report = failing
        record = record_iteration(
            ctx.store,
            ctx.run_id,
            seq,
            mode=mode.id,
            model=model,
            iteration=iteration,
            status=status,
            agent=agent,
            duration_s=duration,
        )
        result.iterations.append(record)
        ctx.progress.stop(
            f"{label}: {record.status} ({duration:.1f}s, {agent.input_tokens + agent.output_tokens}"
            f" tokens, ${agent.cost_usd:.4f})"
        )
        if not isinstance(ctx.supervisor, NullSupervisor):
            steering = ctx.supervisor.after_iteration(
                IterationView(
                    task=task,
                    mode=mode.id,
                    model=model,
                    iteration=iteration,
                    max_iterations=limit,
                    escalations=escalations,
                    result=agent,
                    status=status,
                    changed_files=changed_files(ctx.cwd),
                    diff_digest=diff_digest(ctx.cwd),
                    cost_so_far=result.cost_usd,
                )
            )
            record.steering = steering
            if steering:
                ctx.progress.finding(steering[-1])
        emergency = agent.stopped if (agent.stopped or "").startswith("supervisor") else None
        if agent.stopped and emergency is None:
            return finish(Outcome.STOPPED, agent.stopped, "STOP_REQUESTED")
        if emergency is not None:
            # Keep the partial work where the user can see it; the worktree (if any) is
            # committed to the task branch when the task ends.
            save_diff(ctx.cwd, settings.logs / f"run-{ctx.run_id}" / f"partial-{seq}.diff")
            if "PACE" in emergency or ctx.modes.next_mode(mode.id) is None:
                return finish(Outcome.FAILURE, emergency, "SUPERVISOR_EMERGENCY")

        if status.reason_code == "AGENT_ERROR" and agent.exit_code not in (0, None):
            same_errors = same_errors + 1 if status.reason == last_error else 1
            last_error = status.reason
        else:
            last_error, same_errors = "", 0
        if same_errors >= _SAME_ERROR_LIMIT:
            # The agent CLI itself is broken (a flag it does not know, no login): neither
            # another try nor a stronger model helps, and every try may cost.
            return finish(
                Outcome.FAILURE,
                f"the agent failed {same_errors} times in a row the same way ({last_error}); "
                "fix the agent, then rerun the task with --task-id",
                "AGENT_REPEATED_ERROR",
            )
        answer = None
        previous, previous_output = status, agent.final_text
        state = status.status
        if state == "success":
            return finish(
                Outcome.SUCCESS, status.reason or "the agent reported success", "AGENT_SUCCESS"
            )
        if state == "wait":
            result.wait_state, codes = save_agent_wait(settings, wait_point(), status)
            result.reason_codes += codes
            return finish(
                Outcome.WAITING, status.reason or f"waiting for {status.wait_for}", "AGENT_WAIT"
            )
        escalate_code = escalation_code(state, emergency, iteration, limit)
        if time.monotonic() - started >= settings.task_wall_clock_s:
            return finish(
                Outcome.FAILURE, "the task's wall-clock cap was reached", "WALL_CLOCK_CAP"
            )
        if escalate_code is None:
            iteration += 1
            if state is None or status.reason_code:
                result.reason_codes.append(status.reason_code or "NO_STATUS_BLOCK")
            continue
        target = ctx.modes.next_mode(mode.id, status.escalate_to)
        if target is None:
            why = {
                "AGENT_ESCALATE": "the agent asked to escalate but no stronger mode is left",
                "FAILURE_ESCALATED": status.reason or "the agent reported failure",
                "MAX_ITERATIONS": f"{limit} iterations in {mode.id} without a terminal status",
                "SUPERVISOR_CUT_SHORT": emergency or "",
            }[escalate_code]
            top_code = "FAILURE_AT_TOP_MODE" if state == "failure" else f"{escalate_code}_AT_TOP"
            return finish(Outcome.FAILURE, why, top_code)
        result.reason_codes.append(escalate_code)
        stronger = ctx.modes.get(target)
        if stronger.agent != mode.agent:
            session_id = None  # another agent CLI cannot resume this one's session
        mode = stronger
        result.modes.append(mode.id)
        escalations += 1
        iteration = 1


def _timeout(settings: Settings, mode: Mode, elapsed: float) -> float:
    wall_clock_left = settings.task_wall_clock_s - elapsed
    return max(1.0, min(mode.iteration_timeout_s or settings.iteration_timeout_s, wall_clock_left))


def _act(ctx: LoopContext, mode: Mode, request: AgentRequest, label: str, t0: float) -> AgentResult:
    adapter = adapter_for(ctx.settings, mode)
    tokens = [0]

    def on_event(event: AgentEvent) -> str | None:
        if ctx.stop_event.is_set():
            return "stop requested"
        if event.output_tokens:
            tokens[0] += event.output_tokens
        ctx.progress.event(event)
        ctx.progress.update(f"{label}: {time.monotonic() - t0:.0f}s, {tokens[0]} tokens out")
        return ctx.supervisor.on_event(event)

    agent = adapter.run(request, on_event)
    if agent.not_found and agent.infra is None:
        executable = adapter.command(request)[0]
        agent.infra = missing_binary(mode.agent, executable, agent.stderr_tail)
    return agent
