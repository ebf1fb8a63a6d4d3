"""Building the wait state of a task that stops to wait: the agent's `STATUS: wait`, a usage
limit, or a pause order. One place, so every wait carries the same fields (the task's source,
sender, session, modes, cost) and resumes the same way."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worker.models import StatusBlock, Task
from worker.sources.github.settings import held_reason
from worker.waits.record import save_wait
from worker.waits.state import WaitContext, WaitState
from worker.waits.validate import parse_resume_when

if TYPE_CHECKING:
    from worker.config import Settings

log = logging.getLogger(__name__)

# Without a known reset time, back off 15, 30, 60 minutes (Claude Code's usage limits reset
# within 5 hours).
USAGE_LIMIT_BACKOFF_S = (900, 1800, 3600)


@dataclass
class WaitPoint:
    """Where the task stands when it stops to wait."""

    task: Task
    mode: str
    model: str
    iteration: int
    output: str = ""
    session_id: str | None = None
    modes_used: list[str] = field(default_factory=list)
    cost_usd: float = 0.0


def base_state(
    settings: Settings,
    point: WaitPoint,
    resume_when: str = "user_approval",
    resume_at: datetime | None = None,
) -> WaitState:
    task = point.task
    return WaitState.model_validate(
        {
            "taskId": task.id,
            "timestamp": datetime.now(UTC),
            "resumeWhen": resume_when,
            "resumeAt": resume_at,
            "context": WaitContext(
                mode=point.mode,
                model=point.model,
                iteration=point.iteration,
                outputSnippet=point.output[-1000:],
            ),
            "source": task.source,
            "sourceRef": {
                k: v for k, v in task.ref.items() if isinstance(v, str | int | float | bool | list)
            },
            "taskTitle": task.title,
            "taskBody": task.body,
            "taskSender": task.sender,
            "sessionId": point.session_id,
            "modesUsed": point.modes_used,
            "costUsd": point.cost_usd,
            "approvers": settings.waits.approvers,
        }
    )


def save_agent_wait(
    settings: Settings, point: WaitPoint, status: StatusBlock
) -> tuple[Path, list[str]]:
    """The agent asked to wait: its WAIT_FOR and RESUME_WHEN. A RESUME_WHEN that does not pass
    worker.waits.validate (an unknown condition, a `time:` that is no ISO date, a date out of
    range) is not kept: the wait becomes `user_approval`, its reason says what was wrong, and
    the reason code WAIT_CONDITION_DEFAULTED marks it, so that a human can release it."""
    codes: list[str] = []
    state = base_state(settings, point)
    state.reason = status.reason
    state.wait_for = status.wait_for or ""
    when = (status.resume_when or "").strip()
    try:
        kind, moment = parse_resume_when(when)
        if kind == "pull_request":  # a pull request is worker's to follow, not the agent's
            raise ValueError("pull_request is worker's own condition, after it opens one")
    except ValueError as exc:
        log.warning("%s: RESUME_WHEN rejected: %s", point.task.id, exc)
        codes.append("WAIT_CONDITION_DEFAULTED")
        state.reason = f"{state.reason} (RESUME_WHEN rejected: {exc})".strip()[:1000]
        kind, moment = "user_approval", None
    if kind == "time":
        state.resume_at = moment or datetime.now(UTC) + timedelta(hours=1)
        when = "time"
    elif codes:
        when = kind
    state.resume_when = when
    return save_wait(settings, state), codes


def usage_reset_at(settings: Settings, resets_at: float | None, hits: int) -> datetime:
    """When a task that hit its usage limit (`hits` times before) tries again."""
    if resets_at:
        return datetime.fromtimestamp(resets_at + settings.waits.usage_limit_margin_s, UTC)
    backoff = USAGE_LIMIT_BACKOFF_S[min(hits, len(USAGE_LIMIT_BACKOFF_S) - 1)]
    return datetime.now(UTC) + timedelta(seconds=backoff)


def save_usage_wait(
    settings: Settings, point: WaitPoint, resets_at: float | None, hits: int
) -> Path:
    """A usage limit: a timed wait until the reset plus a margin, or a growing backoff."""
    at = usage_reset_at(settings, resets_at, hits)
    state = base_state(settings, point, "time", at)
    state.reason = "agent usage limit reached"
    state.wait_for = f"usage limit reset at {at.isoformat()}"
    extra = state.model_extra if state.model_extra is not None else {}
    extra["usageLimitHits"] = hits + 1
    return save_wait(settings, state)


def save_pull_request_wait(
    settings: Settings, point: WaitPoint, pull: dict[str, Any], rounds: int
) -> Path:
    """The task opened (or updated) pull request `pull`: it waits on it. `rounds` counts the
    follow-ups already made; past `[github] max_follow_ups` a person decides instead (an
    approval lets the agent go on, a rejection stops it)."""
    number, url = pull["number"], pull.get("url") or ""
    limit = settings.github.follow_limit(point.task.ref)
    state = base_state(settings, point, "pull_request")
    held = rounds >= limit
    if held:  # still followed: a merge, a close or the merge label end it as ever
        state.reason = held_reason(number, rounds, settings.github.max_follow_ups)
        state.wait_for = f"a person's /approve or /reject on the issue or {url}".strip()
    else:
        state.reason = f"pull request #{number} is open"
        state.wait_for = f"pull request #{number}: its checks, reviews and merge {url}".strip()
    state.source_ref.update(
        {"pr": int(number), "prRounds": rounds, "prUrl": str(url), "prHeld": held}
    )
    if pull.get("base"):
        state.source_ref["prBase"] = str(pull["base"])
    state.resume_brief = f"following pull request #{number}: {point.task.title}"[:300]
    return save_wait(settings, state)


def save_pause(settings: Settings, point: WaitPoint, detail: str) -> Path:
    """A pause order: the task waits for a resume order (an approval)."""
    state = base_state(settings, point)
    state.reason = f"paused by an order: {detail}"
    state.wait_for = "a resume order"
    state.resume_brief = f"paused in {point.mode}: {point.task.title}"[:300]
    return save_wait(settings, state)
