"""gather -> act -> verify: one task driven through its modes until a terminal status.

Each iteration gathers the prompt and the agent call, acts (runs the agent under the
supervisor), verifies (the STATUS block and the task's checks, recorded), then decides what
comes next (`run/next_step.py`). Caps: wall clock and cost. The state the steps share and the
context they run in are in `run/task_state.py`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time

from worker.agents.infra import layers, missing_binary
from worker.agents.registry import adapter_for, permission_args, resumes_sessions
from worker.config import Settings
from worker.models import (
    AgentEvent,
    AgentRequest,
    AgentResult,
    Outcome,
    StatusBlock,
    Task,
    TaskResult,
)
from worker.modes import Mode
from worker.process.workspace_git import changed_files, diff_digest
from worker.run.costs import DAILY_BUDGET_REACHED, daily_cap_reached, save_budget_wait
from worker.run.iteration import (
    budget_left,
    record_iteration,
    task_cost_cap,
    verify,
    verify_checks,
)
from worker.run.next_step import NextStep
from worker.run.prompt import PromptParts, build_prompt
from worker.run.slots import shared_usage_wait
from worker.run.task_state import LoopContext, Progress, StartPoint, _Quiet
from worker.sandbox import cli_home
from worker.supervision.protocol import IterationView, NullSupervisor

# Re-exported: run/tasks.py and the benchmarks import them from here.
__all__ = ["LoopContext", "Progress", "StartPoint", "_Quiet", "run_task"]

log = logging.getLogger(__name__)


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


class _TaskRun(NextStep):
    """One task's run: the steps of each iteration."""

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
