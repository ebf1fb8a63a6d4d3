"""`worker submit`: a task written into the inbox as a valid message, atomically.

The message goes through the same model the inbox reads (`worker.sources.message.Message`),
so what `submit` writes is exactly what a run will take.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from worker.config import Settings
from worker.errors import UsageError, describe_validation
from worker.modes import load_modes, modes_path
from worker.sources.message import PRIORITY_WORDS, write_message
from worker.state.known_tasks import known_task_ids


@dataclass(frozen=True)
class Submitted:
    id: str
    path: Path
    to: str
    priority: int | str

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "file": str(self.path), "to": self.to, "priority": self.priority}


def new_message_id(now: datetime | None = None) -> str:
    """`msg-20261126T061500-1a2b3c4d`: sorts by time, unique across machines."""
    stamp = now or datetime.now(UTC)
    return f"msg-{stamp:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"


def submit(
    settings: Settings,
    *,
    title: str,
    body: str = "",
    to: str | None = None,
    priority: str = "normal",
    mode: str | None = None,
    reply_to: str | None = None,
    sender: str | None = None,
) -> Submitted:
    """Validate and write one message into the inbox; raise UsageError naming what is wrong."""
    if not title.strip():
        raise UsageError("the title is empty: say what the task is, e.g. `worker submit 'Fix X'`")
    if mode is not None:
        known = load_modes(modes_path(settings.workspace, settings.modes_file)).modes
        if mode not in known:
            raise UsageError(f"--mode {mode!r}: no such mode (known: {', '.join(known)})")
    if reply_to is not None and (to is None or to == settings.machine_id):
        _require_task(settings, reply_to)  # another machine's tasks are not known here
    now = datetime.now(UTC)
    msg_id, rank, target = new_message_id(now), _priority(priority), to or settings.machine_id
    data = {
        "id": msg_id,
        "from": sender or os.environ.get("USER") or os.environ.get("USERNAME") or "cli",
        "to": target,
        "subject": title.strip(),
        "body": body,
        "status": "unread",
        "priority": rank,
        "created_at": now.isoformat(),
        "thread_id": None,
        "in_reply_to": reply_to,
        "mode": mode,
    }
    try:
        path = write_message(settings.inbox, data)
    except ValidationError as exc:
        raise UsageError(f"not a valid message: {describe_validation(exc)}") from exc
    return Submitted(msg_id, path, target, rank)


def _require_task(settings: Settings, task_id: str) -> None:
    """A reply goes to a task this workspace knows (a waiting one, most often): a reply to
    a typo would sit in the inbox unread, answering nothing."""
    known = known_task_ids(settings)
    if task_id in known:
        return
    shown = ", ".join(known[:10]) + (" ..." if len(known) > 10 else "")
    raise UsageError(
        f"--reply-to {task_id!r}: no task with that id is known here (known: {shown or 'none'});"
        " `worker waits list` shows the waiting ones"
    )


def _priority(value: str) -> int | str:
    word = value.strip().lower()
    if word in PRIORITY_WORDS:
        return word
    if word.isdigit() and 0 <= int(word) <= 9:
        return int(word)
    known = ", ".join(PRIORITY_WORDS)
    raise UsageError(f"--priority {value!r}: use 0 (first) to 9 (last) or one of {known}")
