"""The inbox: a folder of JSON messages, claimed by an atomic rename into `claimed/`.

A claim is a lease recorded in SQLite: a run that dies leaves its message in `claimed/`, and
once the lease has expired the next run moves it back and takes it again. Messages are
`{id, from, to, subject, body, status, priority, created_at, thread_id, in_reply_to, mode}`;
unknown keys are kept. A message that cannot be read is moved to `rejected/` with its reason.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import os
import time
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from worker.config import Settings
from worker.fsutil import atomic_write_text, quarantine
from worker.models import Outcome, Task, TaskResult
from worker.platform.names import portable_name
from worker.sources.base import Listing, Skipped
from worker.sources.message import Message, addressed_messages
from worker.store import Store
from worker.waits.state import file_name

log = logging.getLogger(__name__)

# Claim states of a task that ran to an end (not `released`: a stopped task comes back).
_FINISHED = frozenset({"success", "failure", "waiting", "cancelled"})


class InboxSource:
    name = "inbox"

    def __init__(self, settings: Settings, store: Store | None, dry_run: bool = False) -> None:
        self.settings = settings
        self.store = store
        self.dry_run = dry_run  # list only: a bad message is named, not moved
        self.root = settings.inbox
        self.claimed = self.root / "claimed"
        self.done = self.root / "done"
        self.rejected = self.root / "rejected"

    # -- listing ----------------------------------------------------------------------------
    def list(self) -> Listing:
        listing = Listing(self.name)
        if not self.root.is_dir():
            return listing
        # The kernel's module imports Message from here, hence the import at use.
        from worker.kernel.control import is_control_message

        found: builtins.list[tuple[Message, Path]] = []
        for entry in addressed_messages(self.root, self.settings.machine_id):
            message, path = entry.message, entry.path
            if message is None:
                self._reject(path, entry.error or "unreadable", listing)
                continue
            if message.to not in (self.settings.machine_id, "all"):
                continue
            if message.status != "unread":
                continue
            if message.in_reply_to or self._answers_a_wait(message):
                # A reply belongs to the task it answers (a wait state), not a new task.
                listing.skipped.append(Skipped(message.id, "REPLY_NOT_TASK"))
                continue
            if is_control_message(message):
                # A stop/cancel/pause order is for the scheduling kernel, not work to do.
                listing.skipped.append(Skipped(message.id, "CONTROL_NOT_TASK"))
                continue
            repeated = self._repeats(message, path)
            if repeated:
                self._reject(path, repeated, listing)
                continue
            found.append((message, path))
        found.sort(key=lambda item: (item[0].rank, _ts(item[0].created_at), item[0].id))
        listing.tasks = [self._task(message, path) for message, path in found]
        return listing

    def _answers_a_wait(self, message: Message) -> bool:
        """A message in the thread of a waiting task answers it (`roosync_response`)."""
        thread = message.thread_id
        if not thread or thread == message.id:
            return False
        return (self.settings.wait_states / file_name(thread)).exists()

    def _repeats(self, message: Message, path: Path) -> str | None:
        """Why this file repeats a message already taken, or None. A synced drive's conflicted
        copy (`name (1).json`, as Google Drive makes) or a reused id would run a task twice."""
        for name in (path.name, f"{message.id}.json"):
            if (self.done / name).exists():
                return f"duplicate: message {message.id!r} was already taken ({self.done / name})"
        claim = self.store.claim_of(message.id) if self.store is not None else None
        if claim is not None and claim["state"] in _FINISHED:
            return (
                f"duplicate: message {message.id!r} was already taken ({claim['state']}); "
                f"give a new task a new id, or rerun this one with `worker run --task-id`"
            )
        return None

    def _read(self, path: Path) -> Message | None:
        """One message file, wherever it is (for `--task-id` and status updates)."""
        try:
            return Message.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValidationError) as exc:
            log.warning("inbox: cannot read %s: %s", path, exc)
            return None

    def _reject(self, path: Path, reason: str, listing: Listing | None) -> None:
        log.warning("inbox: %s: %s (moved to %s)", path.name, reason, self.rejected)
        if listing is not None:
            listing.skipped.append(Skipped(path.stem, "MESSAGE_REJECTED", reason))
            listing.errors.append(f"{path.name}: {reason}")
            if not self.dry_run:
                quarantine(path, self.rejected, reason)

    def _task(self, message: Message, path: Path) -> Task:
        return Task(
            id=message.id,
            source=self.name,
            title=message.subject or message.id,
            body=message.body,
            mode=message.mode,
            sender=message.sender,
            priority=message.rank,
            created_at=message.created_at,
            ref={"file": path.name, "thread_id": message.thread_id or message.id},
        )

    def find(self, task_id: str) -> Task | None:
        for folder in (self.root, self.claimed, self.done):
            path = folder / f"{task_id}.json"
            if path.is_file():
                message = self._read(path)
                if message is not None:
                    return self._task(message, path)
        return None

    # -- claims -----------------------------------------------------------------------------
    def recover_expired(self) -> builtins.list[str]:
        """Move messages whose claim lease expired back into the inbox; return their ids."""
        if self.store is None or not self.claimed.is_dir():
            return []
        recovered = []
        for claim in self.store.expired_claims():
            if claim["source"] != self.name:
                continue
            name = json.loads(claim["detail"]).get("file", f"{claim['task_id']}.json")
            with contextlib.suppress(FileNotFoundError):
                os.replace(self.claimed / name, self.root / name)
            self.store.release_claim(claim["task_id"], "expired")
            recovered.append(claim["task_id"])
            log.warning("inbox: lease of %s expired; it is available again", claim["task_id"])
        return recovered

    def claim(self, task: Task, run_id: int) -> bool:
        assert self.store is not None
        name = task.ref.get("file", f"{task.id}.json")
        source = self.root / name
        if not source.exists() and (self.done / name).exists():
            os.replace(self.done / name, source)  # `--task-id` reruns a finished message
        self.claimed.mkdir(parents=True, exist_ok=True)
        if not self.store.claim(
            task.id,
            self.name,
            self.settings.machine_id,
            os.getpid(),
            self.settings.lease_seconds,
            file=name,
            run_id=run_id,
        ):
            return False
        try:
            # The rename is the atomic step: of two runs, exactly one moves the file.
            os.rename(source, self.claimed / name)
        except FileNotFoundError:
            self.store.release_claim(task.id, "lost")
            return False
        except OSError:
            # Not taken after all (claimed/ not writable...): no lease holds it back.
            self.store.release_claim(task.id, "released")
            raise
        return True

    def renew(self, task: Task) -> None:
        if self.store is not None:
            self.store.renew_claim(task.id, self.settings.lease_seconds)

    def release(self, task: Task, result: TaskResult) -> None:
        assert self.store is not None
        name = task.ref.get("file", f"{task.id}.json")
        claimed = self.claimed / name
        if result.outcome is Outcome.STOPPED:
            target, state = self.root / name, "released"
        else:
            target, state = self.done / name, result.outcome.value
            self._set_status(claimed, "read")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(claimed, target)
        except FileNotFoundError:
            log.warning("inbox: claimed message %s vanished before release", name)
        self.store.release_claim(task.id, state)

    def _set_status(self, path: Path, status: str) -> None:
        message = self._read(path)
        if message is not None:
            message.status = status
            atomic_write_text(path, message.dump())

    # -- reporting --------------------------------------------------------------------------
    def report(self, task: Task, result: TaskResult) -> None:
        """Reply to the sender in the inbox folder; the reply id is stable, so a retry
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
        atomic_write_text(self.root / f"{portable_name(reply.id)}.json", reply.dump())


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
    return "\n".join(lines)


def _ts(value: datetime | None) -> float:
    if value is None:
        return time.time()
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()
