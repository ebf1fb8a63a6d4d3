"""The inbox's claims: a message taken by an atomic rename into `claimed/` under a lease
recorded in SQLite, renewed while its task runs, and released into `done/` (or back into the
inbox, when its task stopped); a dead run's message is given back once its lease expired.

`InboxSource` (inbox.py) joins these to its listing and its replies; inbox.py re-exports
`give_back`, `held_name` and `vacant`.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from worker.config import Settings
from worker.errors import ConfigError
from worker.models import Outcome, Task
from worker.sources.message import UTF8_BOM, Message
from worker.state.fsutil import atomic_write_text, rename, replace
from worker.state.store import Store
from worker.waits.state import file_name

if TYPE_CHECKING:
    from worker.results import TaskResult

log = logging.getLogger(__name__)


class InboxFolders:
    """The inbox's folders, and one message file read wherever it is."""

    name = "inbox"

    def __init__(self, settings: Settings, store: Store | None, dry_run: bool = False) -> None:
        self.settings = settings
        self.store = store
        self.dry_run = dry_run  # list only: a bad message is named, not moved
        self.root = settings.inbox
        self.claimed = self.root / "claimed"
        self.done = self.root / "done"
        self.rejected = self.root / "rejected"

    def _read(self, path: Path) -> Message | None:
        """One message file, wherever it is (for `--task-id` and status updates)."""
        try:
            return Message.model_validate_json(path.read_bytes().removeprefix(UTF8_BOM))
        except FileNotFoundError:
            return None
        except (OSError, ValidationError) as exc:
            log.warning("inbox: cannot read %s: %s", path, exc)
            return None


class InboxClaims(InboxFolders):
    """Claim, renew and release a message; give back those whose lease expired."""

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
