"""One iteration's verify step and record, and the budget it runs with. Pure or near-pure
helpers of the task loop (worker/run/loop.py), which keeps the task's state machine."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from worker.config import Settings
from worker.models import AgentResult, IterationRecord, StatusBlock
from worker.modes import Mode
from worker.sandbox.record import record_sandbox
from worker.sources.fallback import failure_report, run_checks
from worker.state.store import Store
from worker.status import parse_status


def task_cost_cap(settings: Settings, mode: Mode) -> float:
    """The task's cost cap while it runs in `mode`: the mode's own, else the global one."""
    return mode.cost_cap_usd or settings.task_cost_cap_usd


def budget_left(mode: Mode, cost_cap: float, spent: float) -> float | None:
    """`--max-budget-usd` for this call: what is left of the cap (claude only)."""
    return max(0.01, cost_cap - spent) if mode.agent == "claude" else None


def verify(agent: AgentResult) -> StatusBlock:
    """The iteration's status: the agent's STATUS block, unless the agent did not finish."""
    status = parse_status(agent.final_text)
    # A killed agent's text is not its final word: a block in it is not believed (false done).
    if agent.timed_out or (status.status is None and (agent.is_error or agent.exit_code)):
        code = "AGENT_TIMEOUT" if agent.timed_out else "AGENT_ERROR"
        detail = (
            [agent.error]
            if agent.error
            else agent.stderr_tail.strip().splitlines()[-1:] or [agent.subtype or ""]
        )
        return StatusBlock(None, f"{code.lower()}: {detail[0][:200]}", reason_code=code)
    if status.status is not None and (agent.is_error or agent.exit_code not in (0, None)):
        # A block from an agent that then failed is not its final word: an error iteration,
        # and the next one (same session) says again where things stand.
        how = f"exited with code {agent.exit_code}" if agent.exit_code else "ended in an error"
        reason = f"agent_error: {how} after writing STATUS: {status.status}"
        return StatusBlock(None, reason, reason_code="AGENT_ERROR")
    if status.status is not None and status.reason_code == "UNKNOWN_STATUS":
        return StatusBlock(None, f"unknown status {status.status!r}", reason_code="UNKNOWN_STATUS")
    return status


def verify_checks(
    status: StatusBlock, checks: list[str], cwd: Path, settings: Settings, log_dir: Path
) -> tuple[StatusBlock, str | None]:
    """A `success` is believed only when the task's checks pass; else `continue`, with the
    failing output for the next prompt."""
    if status.status != "success" or not checks:
        return status, None
    timeout = settings.fallback.command_timeout_s
    failing = [c for c in run_checks(checks, cwd, timeout, log_dir, settings=settings) if not c.ok]
    if not failing:
        return status, None
    reason = "the agent said success but checks still fail"
    return StatusBlock("continue", reason, reason_code="VERIFY_FAILED"), failure_report(failing)


def escalation_code(
    state: str | None, emergency: str | None, iteration: int, limit: int
) -> str | None:
    """Why the task moves to a stronger mode after this iteration, or None to go on."""
    if emergency is not None:
        # A loop cut short mid-iteration: a stronger mode gets the steering and a new try.
        return "SUPERVISOR_CUT_SHORT"
    if state == "escalate":
        return "AGENT_ESCALATE"
    if state == "failure":
        return "FAILURE_ESCALATED"
    if iteration >= limit:
        return "MAX_ITERATIONS"
    return None


def record_iteration(
    store: Store,
    run_id: int,
    seq: int,
    *,
    mode: str,
    model: str,
    iteration: int,
    status: StatusBlock,
    agent: AgentResult,
    duration_s: float,
) -> IterationRecord:
    record = IterationRecord(
        mode=mode,
        model=model,
        iteration=iteration,
        status=status.status or "continue",
        reason=status.reason,
        reason_code=status.reason_code,
        duration_s=duration_s,
        cost_usd=agent.cost_usd,
        input_tokens=agent.input_tokens,
        output_tokens=agent.output_tokens,
        exit_code=agent.exit_code,
    )
    # The row is the record, less the steering (the supervisor adds it after the row is written).
    row = {name: value for name, value in asdict(record).items() if name != "steering"}
    store.add_iteration(run_id, seq, **{**row, "reason": record.reason[:500]})
    record_sandbox(store, run_id, seq, agent.sandbox, agent.sandbox_refusals)
    return record
