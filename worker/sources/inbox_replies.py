"""The inbox's replies: a task's outcome told to its sender in `<inbox>/outbox/`.

`InboxSource` (inbox.py) joins this to its listing and its claims; inbox.py re-exports
`reply_body`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from worker.models import Task
from worker.process.lazyimport import lazy
from worker.process.platform.names import portable_name
from worker.sources.inbox_claims import InboxFolders
from worker.sources.message import Message, outbox
from worker.state.fsutil import atomic_write_text

if TYPE_CHECKING:
    from worker.results import TaskResult

_proc = lazy("worker.process.proc")  # redact(), for replies only: an idle run writes none


class InboxReplies(InboxFolders):
    """The reply to a task's sender."""

    def report(self, task: Task, result: TaskResult) -> None:
        """Reply to the sender in `<inbox>/outbox/`; the reply id is stable, so a retry
        overwrites the same file instead of sending twice."""
        if not task.sender:
            return
        reply = Message.model_validate(
            {
                "id": f"{task.id}-{result.outcome.value}-reply",
                "from": self.settings.machine_id,
                "to": task.sender,
                "subject": f"[{result.outcome.value}] {task.title}"[:200],
                "body": reply_body(result),
                "status": "unread",
                "priority": "normal",
                "created_at": datetime.now(UTC),
                "thread_id": task.ref.get("thread_id", task.id),
                "in_reply_to": task.id,
            }
        )
        atomic_write_text(outbox(self.root) / f"{portable_name(reply.id)}.json", reply.dump())


def reply_body(result: TaskResult) -> str:
    lines = [
        f"Outcome: {result.outcome.value}",
        f"Reason: {result.reason or '-'}",
        f"Modes: {' -> '.join(result.modes) or '-'}",
        f"Iterations: {len(result.iterations)}",
        f"Duration: {result.duration_s:.0f} s",
        f"Cost: ${result.cost_usd:.4f}",
    ]
    if result.branch:
        lines.append(f"Branch: {result.branch}")
    if result.anomalies:
        lines.append(f"Supervisor: {'; '.join(result.anomalies[:5])}")
    if result.final_text:
        lines += ["", "Agent's last words:", result.final_text[-2000:]]
    return _proc.redact("\n".join(lines))  # the agent may have repeated a token it read
