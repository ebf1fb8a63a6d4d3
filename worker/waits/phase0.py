"""Phase 0: before anything new, find the wait states whose condition is met.

Unreadable files are moved aside (`<wait_states>/rejected/`) with their reason; the others
still count.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from worker.config import Settings
from worker.errors import MalformedInput
from worker.fsutil import quarantine
from worker.models import Task
from worker.scheduling import ReadyWait
from worker.store import Store
from worker.waits.state import WaitState, load_wait_state, wait_state_files

log = logging.getLogger(__name__)


@dataclass
class WaitScan:
    ready: list[ReadyWait] = field(default_factory=list)
    pending: int = 0
    errors: list[str] = field(default_factory=list)


def task_of(state: WaitState) -> Task:
    return Task(
        id=state.task_id, source=state.source or "wait", title=state.task_title or state.task_id,
        body=state.task_body, mode=state.context.mode, ref=dict(state.source_ref),
    )


def scan(settings: Settings, store: Store | None, now: datetime | None = None,
         dry_run: bool = False) -> WaitScan:
    now = now or datetime.now(UTC)
    result = WaitScan()
    for path in wait_state_files(settings.wait_states):
        try:
            state = load_wait_state(path)
        except MalformedInput as exc:
            result.errors.append(str(exc))
            log.warning("wait state %s", exc)
            if not dry_run:
                quarantine(path, settings.wait_states / "rejected", str(exc))
            continue
        answer = _ready(state, now)
        if answer is None:
            result.pending += 1
            continue
        result.ready.append(ReadyWait(task_of(state), _epoch(state.timestamp), answer, path))
    return result


def _ready(state: WaitState, now: datetime) -> str | None:
    """The answer the task waited for when its condition is met, else None."""
    if state.condition == "time" and state.resume_at is not None and state.resume_at <= now:
        return f"the time condition is met ({state.resume_at.isoformat()})"
    return None


def _epoch(at: datetime) -> float:
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


def remove(path: Path) -> None:
    path.unlink(missing_ok=True)
