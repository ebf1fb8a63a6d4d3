"""The inbox: a folder of JSON messages, claimed by an atomic rename into `claimed/`.

A claim is a lease recorded in SQLite: a run that dies leaves its message in `claimed/`, and
once the lease has expired the next run moves it back and takes it again. Messages are
`{id, from, to, subject, body, status, priority, created_at, thread_id, in_reply_to, mode}`;
unknown keys are kept. A message that cannot be read is moved to `rejected/` with its reason.

Ids identify messages, never file names: a finished message is kept in `done/` under its id,
and a new message may reuse an old file name. `done/` is never listed: only an explicit
`--task-id` runs a finished message again, on a fresh copy. Replies go to `outbox/`.

Here: the listing and `find`; the claims are in inbox_claims.py, the replies in
inbox_replies.py, joined by `InboxSource` (their names re-exported here).
"""

from __future__ import annotations

import builtins
import logging
import os
import time
from datetime import UTC, datetime
from pathlib import Path

from worker.models import Task
from worker.process.platform.names import portable_name
from worker.sources.base import Listing, Skipped
from worker.sources.inbox_claims import InboxClaims, give_back, held_name, vacant
from worker.sources.inbox_replies import InboxReplies, reply_body
from worker.sources.message import Message, addressed_messages, outbox
from worker.state.fsutil import atomic_write_text, json_files, quarantine
from worker.waits.state import file_name

__all__ = ["InboxSource", "give_back", "held_name", "reply_body", "vacant"]

log = logging.getLogger(__name__)

# Claim states of a task that ran to an end (not `released`: a stopped task comes back).
_FINISHED = frozenset({"success", "failure", "waiting", "cancelled"})


class InboxSource(InboxClaims, InboxReplies):
    """The inbox as a `TaskSource`: its listing here, its claims and replies beside."""

    # -- listing ----------------------------------------------------------------------------
    def list(self) -> Listing:
        listing = Listing(self.name)
        if not self.root.is_dir():
            if self.settings.inbox_dir is not None:  # asked for by name, so say it is missing
                problem = f"inbox folder {self.root} does not exist (inbox_dir, WORKER_INBOX)"
                log.warning("inbox: %s", problem)
                listing.errors.append(problem)
            return listing
        if not self.dry_run and not os.access(self.root, os.W_OK):
            problem = (
                f"inbox folder {self.root} is read-only: its messages cannot be claimed "
                "(worker moves them into claimed/ and done/); give this user write access"
            )
            log.error("inbox: %s", problem)
            listing.errors.append(problem)
            return listing
        # The kernel's module imports Message from here, hence the import at use.
        from worker.kernel.control import is_control_message, unknown_order

        found: builtins.list[tuple[Message, Path]] = []
        store = None if self.dry_run else self.store  # the read's index, not in a dry run
        for entry in addressed_messages(self.root, self.settings.machine_id, store):
            message, path = entry.message, entry.path
            if message is None and entry.odd:  # a pipe, a link to nothing: listed, left alone
                listing.skipped.append(Skipped(path.name, "NOT_A_MESSAGE_FILE", entry.error or ""))
                continue
            if message is None:
                if _being_written(path):  # its writer may not be done: a later run reads it
                    why = f"{entry.error or 'unreadable'}; written in the last {_SETTLE_S:.0f} s"
                    log.info("inbox: %s: %s, left for a later run", path.name, why)
                    listing.skipped.append(Skipped(path.stem, "MESSAGE_INCOMPLETE", why))
                    continue
                self._reject(path, entry.error or "unreadable", listing)
                continue
            if message.to not in (self.settings.machine_id, "all"):
                continue
            if message.status.strip().lower() != "unread":  # "Unread" by hand is unread too
                listing.skipped.append(Skipped(message.id, "MESSAGE_NOT_UNREAD", message.status))
                continue
            if message.in_reply_to or self._answers_a_wait(message):
                # A reply belongs to the task it answers (a wait state), not a new task.
                listing.skipped.append(Skipped(message.id, "REPLY_NOT_TASK"))
                continue
            bad_order = unknown_order(message)
            if bad_order is not None:
                self._set_aside(path, message, bad_order, listing)
                continue
            if is_control_message(message):
                # A stop/cancel/pause order is for the scheduling kernel, not work to do.
                listing.skipped.append(Skipped(message.id, "CONTROL_NOT_TASK"))
                continue
            repeated = self._repeats(message)
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

    def _repeats(self, message: Message) -> str | None:
        """Why this message repeats one already taken, or None. Only its id counts: a synced
        drive's conflicted copy (`name (1).json`) or a message dropped twice would run a task
        twice, while a new message may reuse an old file name."""
        done = self.done / file_name(message.id)
        if done.exists():
            return f"duplicate: message {message.id!r} was already taken ({done})"
        claim = self.store.claim_of(message.id) if self.store is not None else None
        if claim is not None and claim["state"] in _FINISHED:
            return (
                f"duplicate: message {message.id!r} was already taken ({claim['state']}); "
                f"give a new task a new id, or rerun this one with `worker run --task-id`"
            )
        return None

    def _reject(self, path: Path, reason: str, listing: Listing | None) -> None:
        log.warning("inbox: %s: %s (moved to %s)", path.name, reason, self.rejected)
        if listing is not None:
            listing.skipped.append(Skipped(path.stem, "MESSAGE_REJECTED", reason))
            listing.errors.append(f"{path.name}: {reason}")
            if not self.dry_run:
                quarantine(path, self.rejected, reason)

    def _order(self, message: Message, path: Path) -> bool:
        """A control message: an order for the kernel, or one it cannot read (set aside)."""
        from worker.kernel.control import is_control_message, unknown_order  # as in `list`

        bad_order = unknown_order(message)
        if bad_order is not None and path.parent == self.root:
            self._set_aside(path, message, bad_order, None)
        return bad_order is not None or is_control_message(message)

    def _set_aside(
        self, path: Path, message: Message, reason: str, listing: Listing | None
    ) -> None:
        """A message that cannot be understood: moved to `rejected/` with its reason, and the
        sender told why (once: by the run that moved it)."""
        if listing is not None:
            listing.skipped.append(Skipped(message.id, "MESSAGE_REJECTED", reason))
            listing.errors.append(f"{path.name}: {reason}")
        log.warning("inbox: %s: %s (moved to %s)", path.name, reason, self.rejected)
        if self.dry_run or quarantine(path, self.rejected, reason) is None:
            return
        if not message.sender:
            return
        reply = Message.model_validate(
            {
                "id": f"{message.id}-rejected-reply",
                "from": self.settings.machine_id,
                "to": message.sender,
                "subject": f"[rejected] {message.subject or message.id}"[:200],
                "body": f"Your message {message.id} was set aside, not run: {reason}.",
                "status": "unread",
                "priority": "normal",
                "created_at": datetime.now(UTC),
                "thread_id": message.thread_id or message.id,
                "in_reply_to": message.id,
            }
        )
        atomic_write_text(outbox(self.root) / f"{portable_name(reply.id)}.json", reply.dump())

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
        """The message with this id: waiting in the inbox, claimed, or finished (`done/`, run
        again on a fresh copy). The file named after the id is tried first, then every file."""
        for folder in (self.root, self.claimed, self.done):
            likely = [folder / f"{task_id}.json", folder / file_name(task_id)]
            for path in [*dict.fromkeys(likely), *json_files(folder)]:
                message = self._read(path) if path.is_file() else None
                if message is not None and message.id == task_id and self._order(message, path):
                    return None  # an order (or a message meant as one) is never a task
                if message is not None and message.id == task_id:
                    task = self._task(message, path)
                    if folder == self.done:
                        task.ref["origin"] = "done"
                    return task
        return None


# A sender that writes in place (`echo ... > inbox/m.json`) leaves a file that is not yet a
# message for as long as it writes: one that bad and this young is read again, not rejected.
_SETTLE_S = 10.0


def _being_written(path: Path) -> bool:
    try:
        return abs(time.time() - path.stat().st_mtime) < _SETTLE_S
    except OSError:
        return False


def _ts(value: datetime | None) -> float:
    if value is None:
        return time.time()
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()
