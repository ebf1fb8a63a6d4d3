"""Inbox messages: the model, and one shared read of the inbox folder per run.

Several parts of a run look at the inbox (new tasks, control orders, replies to waiting
tasks). `addressed_messages` reads the folder once and parses only the files that mention
this machine or `all`; the others are never parsed. The result is reused while the folder is
unchanged (its mtime: atomic writes and renames change it) for at most a few seconds.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from worker.errors import describe_validation
from worker.fsutil import atomic_write_text, json_files
from worker.platform.names import portable_name

_CACHE_MAX_AGE_S = 2.0


_PRIORITY_WORDS = {"urgent": 0, "critical": 0, "high": 2, "medium": 5, "normal": 5, "low": 8}
PRIORITY_WORDS = tuple(_PRIORITY_WORDS)  # the words a priority may be given in


class Message(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    id: str = Field(min_length=1, max_length=200)
    sender: str = Field(alias="from", min_length=1)
    to: str = Field(min_length=1)
    subject: str = ""
    body: str = ""
    status: str = "unread"
    priority: int | str = "normal"
    created_at: datetime | None = None
    thread_id: str | None = None
    in_reply_to: str | None = None
    mode: str | None = None

    @field_validator("id")
    @classmethod
    def _safe_id(cls, value: str) -> str:
        if any(ch in value for ch in "/\\") or value.startswith("."):
            raise ValueError("must not contain path separators or start with a dot")
        if any(ord(ch) < 32 for ch in value):
            raise ValueError("must not contain control characters (newlines, tabs)")
        return value

    @field_validator("sender", "to")
    @classmethod
    def _one_line(cls, value: str) -> str:
        # These reach prompts and file names outside any quoting.
        if any(ord(ch) < 32 for ch in value):
            raise ValueError("must not contain control characters (newlines, tabs)")
        return value

    @property
    def rank(self) -> int:
        if isinstance(self.priority, int):
            return max(0, min(9, self.priority))
        return _PRIORITY_WORDS.get(self.priority.strip().lower(), 5)

    def dump(self) -> str:
        return json.dumps(self.model_dump(mode="json", by_alias=True), indent=2) + "\n"


@dataclass(frozen=True)
class InboxEntry:
    """A message file that mentions this machine or `all`: parsed, or why it could not be."""

    path: Path
    message: Message | None
    error: str | None = None


_cache: dict[tuple[str, str], tuple[int, float, list[InboxEntry]]] = {}


def addressed_messages(folder: Path, machine_id: str) -> list[InboxEntry]:
    """The inbox's message files that may concern this machine, sorted by file name."""
    try:
        mtime = folder.stat().st_mtime_ns
    except OSError:
        return []
    key = (str(folder), machine_id)
    cached = _cache.get(key)
    now = time.monotonic()
    if cached is not None and cached[0] == mtime and now - cached[1] < _CACHE_MAX_AGE_S:
        return cached[2]
    needles = (b'"all"', json.dumps(machine_id).encode())
    entries = [
        InboxEntry(path, None, "not a message: a message is a JSON file named *.json")
        for path in _other_files(folder)
    ]
    for path in json_files(folder):
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            continue  # taken by another run meanwhile
        except OSError as exc:
            entries.append(InboxEntry(path, None, f"unreadable: {exc}"))
            continue
        if raw.lstrip()[:1] != b"{":
            entries.append(InboxEntry(path, None, "not JSON: a message is one JSON object"))
            continue
        if not any(needle in raw for needle in needles):
            continue  # a message for another machine is never parsed
        try:
            entries.append(InboxEntry(path, Message.model_validate_json(raw)))
        except ValidationError as exc:
            problems = describe_validation(exc, root="message")
            entries.append(InboxEntry(path, None, f"invalid message: {problems}"))
    _cache[key] = (mtime, now, entries)
    return entries


# Files a sync client or an editor is still writing: theirs, not ours to move.
_IN_PROGRESS = (".tmp", ".part", ".partial", ".crdownload", ".download", "~", ".swp")


def _other_files(folder: Path) -> list[Path]:
    """Files of the inbox folder that cannot be messages (not `*.json`), sorted."""
    try:
        with os.scandir(folder) as entries:
            return sorted(
                Path(e.path)
                for e in entries
                if not e.name.endswith(".json")
                and not e.name.startswith((".", "~"))
                and not e.name.lower().endswith(_IN_PROGRESS)
                and e.is_file()
            )
    except OSError:
        return []


def outbox(inbox: Path) -> Path:
    """Where worker's own messages to senders go: never the listed folder, so a reply is not
    parsed again on every run."""
    return inbox / "outbox"


def write_message(folder: Path, data: dict[str, Any]) -> Path:
    """Validate and write one message file (used by the intercom and tests)."""
    message = Message.model_validate(data)
    path = folder / f"{portable_name(message.id)}.json"
    atomic_write_text(path, message.dump())
    return path
