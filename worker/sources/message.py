"""Inbox messages: the model, and one shared read of the inbox folder per run.

Several parts of a run look at the inbox (new tasks, control orders, replies to waiting
tasks). `addressed_messages` reads the folder once and parses only the files that mention
this machine or `all`; the others are never parsed. The result is reused while the folder is
unchanged (its mtime: atomic writes and renames change it) for at most a few seconds after the
read ended. A run (with its store) remembers the files for other machines with their
signature, and reads them again only when it changed (`worker.sources.inbox_index`); the files
that mention us are read whole on every run, so one rewritten in place is never missed.
"""

import json
import os
import re
import stat
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from worker.errors import describe_validation
from worker.process.platform.names import portable_name
from worker.sources.inbox_index import IndexedRead
from worker.state.fsutil import atomic_write_text, read_bytes
from worker.state.store import Store

_CACHE_MAX_AGE_S = 2.0
# Windows editors and PowerShell 5 start UTF-8 files with it; JSON readers may ignore it
# (RFC 8259, section 8.1), so a message saved that way is read as any other.
UTF8_BOM = b"\xef\xbb\xbf"


_PRIORITY_WORDS = {"urgent": 0, "critical": 0, "high": 2, "medium": 5, "normal": 5, "low": 8}
PRIORITY_WORDS = tuple(_PRIORITY_WORDS)  # the words a priority may be given in


class Message(BaseModel):
    # Built on first use, not at import: an idle run parses no message (none is for us).
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)

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

    @field_validator("priority", mode="before")
    @classmethod
    def _known_priority(cls, value: object) -> object:
        """0 (first) to 9 (last), or one of the words: anything else (`42`, `-1`, `true`,
        `"superurgent"`) is refused, not read as some priority the sender never meant."""
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 9:
            return value
        if isinstance(value, str) and value.strip().lower() in _PRIORITY_WORDS:
            return value
        if isinstance(value, str) and value.strip() in tuple("0123456789"):
            return int(value.strip())
        words = ", ".join(PRIORITY_WORDS)
        raise ValueError(f"{value!r} is no priority: use 0 (first) to 9 (last) or one of {words}")

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
    odd: bool = False  # no regular file (a pipe, a link): listed, never moved or read


_cache: dict[tuple[str, str], tuple[int, float, list[InboxEntry]]] = {}
_clock = time.monotonic


def addressed_messages(
    folder: Path, machine_id: str, store: Store | None = None
) -> list[InboxEntry]:
    """The inbox's message files that may concern this machine, sorted by file name. With
    the run's `store`, files for other machines that are unchanged since a run read them are
    not read again (`worker.sources.inbox_index`)."""
    try:
        mtime = folder.stat().st_mtime_ns
    except OSError:
        return []
    key = (str(folder), machine_id)
    cached = _cache.get(key)
    if cached is not None and cached[0] == mtime and _clock() - cached[1] < _CACHE_MAX_AGE_S:
        return cached[2]
    indexed = IndexedRead.open(store, folder, machine_id)
    try:
        entries = _read_addressed(folder, machine_id, indexed)
        if indexed is not None:
            indexed.save()
    finally:
        if indexed is not None:
            indexed.close()
    # The age counts from the end of the read: a read longer than the maximum age (a large
    # inbox, a loaded machine) is still reused by the run's other readers.
    _cache[key] = (mtime, _clock(), entries)
    return entries


def _read_addressed(
    folder: Path, machine_id: str, indexed: IndexedRead | None = None
) -> list[InboxEntry]:
    """One pass over the folder in its own order (no list of every name, no sort of them):
    files that cannot be messages first, then the messages that may concern us, by name.
    With an index, a file remembered as for others with its signature unchanged is skipped."""
    # `"all"` or this machine's id as JSON writes it: one regular-expression scan is about
    # four times cheaper than two `in` tests on a message-sized text. (The index remembers the
    # files this finds nothing in: a change to the rule changes inbox_index.MENTIONS_RULE.)
    mentions = re.compile(
        re.escape(b'"all"') + b"|" + re.escape(json.dumps(machine_id).encode())
    ).search
    others: list[InboxEntry] = []
    found: list[InboxEntry] = []
    try:
        scan = os.scandir(folder)
    except OSError:
        return []
    with scan:
        for entry in scan if indexed is None else indexed.unread(scan):
            name = entry.name
            if name.startswith("."):
                continue
            if entry.is_symlink():  # where it points is not the inbox's to say: never read
                what = _LINK if entry.is_file() else odd_entry(entry)
                if what is not None:
                    others.append(InboxEntry(folder / name, None, what, odd=True))
                continue
            if not entry.is_file():
                what = odd_entry(entry)
                if what is not None:
                    others.append(InboxEntry(folder / name, None, what, odd=True))
                continue
            if not name.endswith(".json"):
                if not name.startswith("~") and not name.lower().endswith(_IN_PROGRESS):
                    others.append(InboxEntry(folder / name, None, _NOT_A_MESSAGE))
                continue
            try:
                raw = read_bytes(entry.path).removeprefix(UTF8_BOM)
            except FileNotFoundError:
                continue  # taken by another run meanwhile
            except OSError as exc:
                found.append(InboxEntry(folder / name, None, f"unreadable: {exc}"))
                continue
            if not raw.startswith(b"{") and not raw.lstrip().startswith(b"{"):
                found.append(InboxEntry(folder / name, None, _NOT_JSON))
                continue
            if mentions(raw) is None:
                if indexed is not None:
                    indexed.for_others(name)
                continue  # a message for another machine is never parsed
            try:
                found.append(InboxEntry(folder / name, Message.model_validate_json(raw)))
            except ValidationError as exc:
                problems = describe_validation(exc, root="message")
                found.append(InboxEntry(folder / name, None, f"invalid message: {problems}"))
    others.sort(key=_by_name)
    found.sort(key=_by_name)
    return others + found


def odd_entry(entry: os.DirEntry[str]) -> str | None:
    """What an inbox entry that is no regular file is, when it is worth saying (it may have
    been meant as a message), or None: a folder not named like a message is just a folder.
    Never opened: a named pipe would block the read until something writes to it."""
    try:
        mode = os.stat(entry.path).st_mode  # through a link, to what it points at
    except FileNotFoundError:
        target = os.readlink(entry.path) if entry.is_symlink() else "?"
        return f"not a message file: a symbolic link to nothing ({target})"
    except OSError as exc:
        return f"not a message file: {exc.strerror or exc}"
    link = "a symbolic link to " if entry.is_symlink() else ""
    if stat.S_ISDIR(mode):
        return f"not a message file: {link}a folder" if entry.name.endswith(".json") else None
    kinds = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))
    what = next((name for test, name in kinds if test(mode)), "a device or special file")
    return f"not a message file: {link}{what}"


_NOT_A_MESSAGE = "not a message: a message is a JSON file named *.json"
_NOT_JSON = "not JSON: a message is one JSON object"
_LINK = "not a message file: a symbolic link (worker never reads through a link in the inbox)"
# Files a sync client or an editor is still writing: theirs, not ours to move.
_IN_PROGRESS = (".tmp", ".part", ".partial", ".crdownload", ".download", "~", ".swp")


def _by_name(entry: InboxEntry) -> str:
    """Names sort as `Path` objects do: case-folded where the file system ignores case."""
    return entry.path.name.lower() if os.name == "nt" else entry.path.name


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
