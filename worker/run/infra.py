"""What a task run does when the agent's infrastructure failed, not the task.

A bad key or a missing agent program: the task is released as it was (outcome `stopped`), the
run exits 78 and says which setting to fix. An unavailable API (overloaded, 5xx, network):
the task waits 5, 15, then 60 minutes and tries the same iteration again, without counting it
or escalating. A usage limit keeps its own timed wait (worker/waits/saving.py); a CLI that
crashed is an agent error like any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from worker.config import Settings
from worker.models import InfraFailure, InfraKind, Outcome
from worker.waits.record import save_wait
from worker.waits.saving import WaitPoint, base_state

# 5, 15, 60 minutes by attempt: long enough for an overloaded API to recover,
# short enough that the queue does not stall for a morning.
UNAVAILABLE_BACKOFF_S = (300, 900, 3600)
CONFIG_KINDS = frozenset({InfraKind.AUTH, InfraKind.MISSING_BINARY})
HITS_KEY = "apiUnavailableHits"
ANSWER_KEY = "pendingAnswer"  # an answer the failed iteration was given, for the retry
CODES = {
    InfraKind.AUTH: "AGENT_AUTH_FAILED",
    InfraKind.MISSING_BINARY: "AGENT_NOT_FOUND",
    InfraKind.UNAVAILABLE: "AGENT_API_UNAVAILABLE",
}


@dataclass
class InfraEnd:
    outcome: Outcome
    reason: str
    code: str
    wait_state: Path | None = None


def infra_end(
    settings: Settings, infra: InfraFailure, point: WaitPoint, hits: int, answer: str | None
) -> InfraEnd | None:
    """How the task ends for this failure; None when the loop goes on as usual (a usage
    limit, a crash). `answer` is what the failed iteration was told on resuming (an
    approval): the model never read it, so the retry is told it again."""
    if infra.kind in CONFIG_KINDS:
        fix = infra.setting or "the agent's set-up"
        reason = f"{infra.message}. Fix {fix}, then run again; the task was left as it was"
        return InfraEnd(Outcome.STOPPED, reason, CODES[infra.kind])
    if infra.kind is InfraKind.UNAVAILABLE:
        path, at = save_unavailable_wait(settings, point, infra, hits, answer)
        reason = f"{infra.message}; the task waits and tries again after {at:%H:%M} UTC"
        return InfraEnd(Outcome.WAITING, reason, CODES[infra.kind], path)
    return None


def save_unavailable_wait(
    settings: Settings, point: WaitPoint, infra: InfraFailure, hits: int, answer: str | None
) -> tuple[Path, datetime]:
    """A timed wait for the API to come back: 5, 15, 60 minutes by attempt."""
    at = datetime.now(UTC) + timedelta(
        seconds=UNAVAILABLE_BACKOFF_S[min(hits, len(UNAVAILABLE_BACKOFF_S) - 1)]
    )
    state = base_state(settings, point, "time", at)
    state.reason = infra.message
    state.wait_for = f"the model API to answer again (retry at {at.isoformat()})"
    extra = state.model_extra if state.model_extra is not None else {}
    extra[HITS_KEY] = hits + 1
    if answer:
        extra[ANSWER_KEY] = answer
    return save_wait(settings, state), at
