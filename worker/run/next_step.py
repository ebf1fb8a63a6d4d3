"""What comes after an iteration: another one (in this mode or a stronger one), or the task's
end: success, failure, a wait the agent asked for, a stop, the same agent error too often, and
the infrastructure failures and usage limits that are not the task's failure.

`continue` runs another iteration; `success` and `failure` end the task; `escalate`, a
failure below the top mode and `maxIterations` without a terminal status move to the next
mode with the count starting over; `wait` saves a wait state.
"""

from __future__ import annotations

import time

from worker.errors import WorkerError
from worker.models import AgentResult, InfraKind, Outcome, StatusBlock, TaskResult
from worker.process.workspace_git import save_diff
from worker.run.infra import infra_end
from worker.run.iteration import escalation_code
from worker.run.slots import share_usage_limit
from worker.run.task_state import TaskState
from worker.waits.saving import save_agent_wait, save_usage_wait

# The same call failing with the same error 3 times (OpenHands; SWE-agent requeries 3) means
# the agent, not the task, is broken.
_SAME_ERROR_LIMIT = 3


class NextStep(TaskState):
    """The task's state with the decision that follows each iteration."""

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
