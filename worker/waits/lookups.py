"""Shared, lazy, read-once views of local sources for one phase-0 pass: each task's intercom
notes and the inbox's replies. Every condition asks these, so each folder is read once."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from worker.config import Settings
from worker.sources.message import Message, addressed_messages
from worker.state.fsutil import subfolders
from worker.state.store import Store
from worker.waits import intercom
from worker.waits.intercom import Note
from worker.waits.state import WaitState


@dataclass
class Lookups:
    settings: Settings
    dry_run: bool = False
    store: Store | None = None  # the run's: the inbox read keeps its index there
    _notes: dict[Path, list[tuple[Path, Note]]] = field(default_factory=dict)
    _replies: list[tuple[Path, Message]] | None = None
    _folders: set[str] | None = None  # the intercom's task folders, listed once
    _intercom: Path = field(init=False)

    def quiet(self) -> bool:
        """No task has an intercom folder and no reply waits in the inbox: no wait has a
        note or a reply (most runs; a condition then answers a thousand waits at once)."""
        return not self._intercom_folders() and not self._all_replies()

    def notes(self, path: Path) -> list[tuple[Path, Note]]:
        """The unread intercom notes of the task whose wait-state file is `path`."""
        if path.stem not in self._intercom_folders():
            return []  # most waits have no notes: no folder to look into
        folder = self._intercom / path.stem
        if folder not in self._notes:
            self._notes[folder] = intercom.read_notes(
                self.settings, folder, quarantine_bad=not self.dry_run
            )
        return self._notes[folder]

    def _intercom_folders(self) -> set[str]:
        if self._folders is None:
            self._intercom = intercom.root(self.settings)
            self._folders = {folder.name for folder in subfolders(self._intercom)}
        return self._folders

    def replies_to(self, state: WaitState) -> list[tuple[Path, Message]]:
        """Unread inbox replies addressed to this machine that answer this task."""
        if not self._all_replies():
            return []  # the usual case: nothing to match a thousand waits against
        ids = {state.task_id}
        thread = state.source_ref.get("thread_id")
        if isinstance(thread, str) and thread:
            ids.add(thread)
        return [
            (path, message)
            for path, message in self._all_replies()
            if message.in_reply_to in ids or message.thread_id in ids
        ]

    def _all_replies(self) -> list[tuple[Path, Message]]:
        if self._replies is not None:
            return self._replies
        self._replies = []
        root = self.settings.inbox
        if not root.is_dir():
            return self._replies
        me = self.settings.machine_id
        for entry in addressed_messages(root, me, self.store):
            path, message = entry.path, entry.message
            if message is None:
                continue  # the inbox source quarantines it with its reason
            if (
                message.to == me
                and message.sender != me
                and message.status == "unread"
                and (message.in_reply_to or message.thread_id)
            ):
                self._replies.append((path, message))
        return self._replies
