"""The inbox: a folder of JSON messages, claimed by an atomic rename into `claimed/`.

A claim is a lease recorded in SQLite: a run that dies leaves its message in `claimed/`, and
once the lease has expired the next run moves it back and takes it again. Messages are
`{id, from, to, subject, body, status, priority, created_at, thread_id, in_reply_to, mode}`;
unknown keys are kept. A message that cannot be read is moved to `rejected/` with its reason.

Ids identify messages, never file names: a finished message is kept in `done/` under its id,
and a new message may reuse an old file name. `done/` is never listed: only an explicit
`--task-id` runs a finished message again, on a fresh copy. Replies go to `outbox/`.
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
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from worker.config import Settings
from worker.errors import ConfigError
from worker.models import Outcome, Task
from worker.process.lazyimport import lazy
from worker.process.platform.names import portable_name
from worker.sources.base import Listing, Skipped
from worker.sources.message import UTF8_BOM, Message, addressed_messages, outbox
from worker.state.fsutil import atomic_write_text, json_files, quarantine, rename, replace
from worker.state.store import Store
from worker.waits.state import file_name

if TYPE_CHECKING:
    from worker.results import TaskResult

log = logging.getLogger(__name__)
_proc = lazy("worker.process.proc")  # redact(), for replies only: an idle run writes none

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

    def _read(self, path: Path) -> Message | None:
        """One message file, wherever it is (for `--task-id` and status updates)."""
        try:
            return Message.model_validate_json(path.read_bytes().removeprefix(UTF8_BOM))
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

    # -- claims -----------------------------------------------------------------------------
    def recover_expired(self) -> builtins.list[str]:
        """Give back the messages whose claim lease expired; return their ids."""
        if self.store is None:
            return []
        recovered = []
        for claim in self.store.expired_claims():
            if claim["source"] != self.name or not self._holds(claim):
                continue
            if self.store.recover_claim(claim["task_id"], lambda row: give_back(self.root, row)):
                recovered.append(claim["task_id"])
                log.warning("inbox: lease of %s expired; it is available again", claim["task_id"])
        return recovered

    def _holds(self, claim: dict[str, Any]) -> bool:
        """Whether this inbox holds the claimed message. A fleet's claims are shared and its
        inboxes may not be: only a run that has the file in its `claimed/` brings it back, or
        another machine's expired claim would be released with its file stranded there."""
        if self.store is None or self.store.claims is None:
            return True  # one machine: a claim whose file is gone is released all the same
        return (self.claimed / held_name(claim)).exists()

    def claim(self, task: Task, run_id: int) -> bool:
        assert self.store is not None
        name = task.ref.get("file", f"{task.id}.json")
        held = file_name(task.id)  # one live claim per id: never another claim's file
        try:
            self.claimed.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"inbox folder {self.root}: cannot create {self.claimed.name}/ to claim "
                f"messages ({exc.strerror or exc}); give this user write access"
            ) from exc
        if task.ref.get("origin") != "done" and not (self.root / name).exists():
            return False  # taken since the listing (by a run sharing the inbox): not ours
        if not self.store.claim(
            task.id,
            self.name,
            self.settings.machine_id,
            os.getpid(),
            self.settings.lease_seconds,
            file=name,
            held=held,
            run_id=run_id,
            origin=task.ref.get("origin", "inbox"),
        ):
            return False
        try:
            if task.ref.get("origin") == "done":
                taken = self._fresh_copy(name, held)  # `--task-id` of a finished message
            else:
                # The rename is the atomic step: of two runs, exactly one moves the file.
                rename(self.root / name, self.claimed / held)
                taken = self._read(self.claimed / held)
        except FileNotFoundError:
            self.store.release_claim(task.id, "lost")
            return False
        except OSError as exc:
            # Not taken after all: no lease holds it back.
            self.store.release_claim(task.id, "released")
            raise ConfigError(
                f"inbox folder {self.root}: cannot move {name} into {self.claimed.name}/ "
                f"({exc.strerror or exc}); give this user write access"
            ) from exc
        if taken is None or taken.id != task.id:
            # A listing older than the folder: the file now holds another message. Put back
            # what we just moved, untouched.
            with contextlib.suppress(FileNotFoundError):
                rename(self.claimed / held, vacant(self.root, name, task.id))
            self.store.release_claim(task.id, "lost")
            return False
        task.ref["held"] = held
        return True

    def _fresh_copy(self, name: str, held: str) -> Message | None:
        """A finished message copied into `claimed/` as unread; `done/` keeps its own."""
        message = self._read(self.done / name)
        if message is None:
            raise FileNotFoundError(self.done / name)
        message.status = "unread"
        atomic_write_text(self.claimed / held, message.dump())
        return message

    def renew(self, task: Task) -> None:
        if self.store is not None:
            self.store.renew_claim(task.id, self.settings.lease_seconds)

    def release(self, task: Task, result: TaskResult) -> None:
        """Move the message out of `claimed/`, then end the claim: a crash in between leaves
        an expired claim whose file is already where it belongs."""
        assert self.store is not None
        name = task.ref.get("file", f"{task.id}.json")
        held = self.claimed / task.ref.get("held", name)
        if result.outcome is not Outcome.STOPPED:
            target, state = self.done / file_name(task.id), result.outcome.value
        elif task.ref.get("origin") == "done":
            target, state = None, "released"  # a stopped rerun: done/ keeps the original
        else:
            target, state = vacant(self.root, name, task.id), "released"
        try:
            if target is None:
                os.unlink(held)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                replace(held, target)
        except FileNotFoundError:
            log.warning("inbox: claimed message %s vanished before release", name)
        if target is not None and state != "released":
            self._set_status(target, "read")  # in done/, never listed: a crash here is harmless
        self.store.release_claim(task.id, state)

    def _set_status(self, path: Path, status: str) -> None:
        message = self._read(path)
        if message is not None:
            message.status = status
            atomic_write_text(path, message.dump())

    # -- reporting --------------------------------------------------------------------------
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


def give_back(root: Path, claim: dict[str, Any]) -> None:
    """Move an expired claim's message from `claimed/` back into the inbox (the recovery step
    of `Store.recover_claim`); a file already gone (done, or back) is left as it is. The fresh
    copy of a `--task-id` rerun is dropped: the finished message stays in `done/`."""
    detail = json.loads(claim["detail"] or "{}")
    name = Path(str(detail.get("file") or f"{claim['task_id']}.json")).name
    held = root / "claimed" / held_name(claim)
    with contextlib.suppress(FileNotFoundError):
        if detail.get("origin") == "done":
            os.unlink(held)
        else:
            replace(held, vacant(root, name, claim["task_id"]))


def held_name(claim: dict[str, Any]) -> str:
    """The claimed message's name in `claimed/`: named after its id (older claims kept the
    name the message came with)."""
    detail = json.loads(claim["detail"] or "{}")
    return Path(str(detail.get("held") or detail.get("file") or f"{claim['task_id']}.json")).name


def vacant(root: Path, name: str, task_id: str) -> Path:
    """Where a claimed message goes back into the inbox: under its own name, unless a new
    message has taken that name meanwhile (never overwritten), then under its id."""
    for candidate in (name, file_name(task_id)):
        if not (root / candidate).exists():
            return root / candidate
    stem, n = Path(file_name(task_id)).stem, 2
    while (root / f"{stem}.{n}.json").exists():
        n += 1
    return root / f"{stem}.{n}.json"


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
