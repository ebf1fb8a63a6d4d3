"""The local intercom: notes for one task in `<state>/intercom/<task-file-stem>/*.json`.

A note is a message (`worker intercom send`), an approval or a rejection (`worker waits
approve|reject`). It carries its origin (`cli:<OS user>`), and only a note whose exact bytes
the CLI recorded counts (`worker.waits.authored`): a file written there by anything else is
moved to `rejected/` with `NOTE_UNSIGNED`, as is a note that cannot be read. Writes are
atomic; a note is moved to `done/` once the run that received it has ended.
"""

import logging
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worker.config import Settings
from worker.state.fsutil import atomic_write_text, json_files, quarantine, replace
from worker.waits import authored
from worker.waits.state import file_name

log = logging.getLogger(__name__)

NOTE_SCHEMA_VERSION = 1
Kind = Literal["message", "approval", "rejection"]


class Note(BaseModel):
    # Unknown keys are kept (a hand-written note may carry more); known keys are validated.
    # Built on first use, not at import: most runs read no note.
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)

    schema_version: int = NOTE_SCHEMA_VERSION
    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12], min_length=1)
    task_id: str = ""
    kind: Kind = "message"
    text: str = ""
    by: str | None = None  # None: the local user at this machine's terminal
    origin: str | None = None  # `cli:<OS user>`: the channel that wrote it, and who ran it
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    def at(self) -> datetime:
        return self.created_at if self.created_at.tzinfo else self.created_at.replace(tzinfo=UTC)


def root(settings: Settings) -> Path:
    return settings.state / "intercom"


def folder_for(settings: Settings, task_id: str) -> Path:
    """The notes folder of a task: named like its wait-state file, without `.json`."""
    return root(settings) / file_name(task_id)[: -len(".json")]


def write_note(
    settings: Settings,
    task_id: str,
    kind: Kind,
    text: str = "",
    by: str | None = None,
    folder: Path | None = None,
) -> Path:
    """Write one note into `folder` (default: the folder of the task's own wait-state name;
    a waiting task's folder is named like its file, which the spec's tool may name freely)."""
    note = Note(task_id=task_id, kind=kind, text=text, by=by, origin=authored.origin())
    stamp = note.created_at.strftime("%Y%m%dT%H%M%S%f")
    path = (folder or folder_for(settings, task_id)) / f"{stamp}-{note.id}.json"
    Note.model_validate_json(note.model_dump_json())  # validate what we write
    text = note.model_dump_json(indent=2) + "\n"
    authored.sign(settings, text.encode("utf-8"), kind)  # before the file can be seen
    atomic_write_text(path, text)
    return path


def read_notes(
    settings: Settings, folder: Path, quarantine_bad: bool = True
) -> list[tuple[Path, Note]]:
    """The unread notes of one folder written by worker's CLI, oldest first; other files
    moved aside with their reason (or skipped)."""
    if not folder.is_dir():
        return []
    found = []
    signed = authored.signed(settings)
    for path in json_files(folder):
        try:
            note, problem = _read(path, signed)
        except FileNotFoundError:
            continue  # consumed meanwhile
        if note is not None:
            found.append((path, note))
            continue
        log.warning("intercom: %s", problem)
        if quarantine_bad:
            quarantine(path, folder / "rejected", problem)
    found.sort(key=lambda item: (item[1].at(), item[0].name))
    return found


def _read(path: Path, signed: set[str]) -> tuple[Note | None, str]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        return None, f"{path.name}: cannot read it: {exc.strerror}"
    if authored.digest(raw) not in signed:
        return None, authored.refusal(path.name)
    try:
        return Note.model_validate_json(raw), ""
    except ValidationError as exc:
        return None, f"{path.name}: not an intercom note: {_short(exc)}"


def consume(paths: list[Path]) -> int:
    """Move notes (or inbox replies) into the `done/` folder beside them; return how many."""
    moved = 0
    for path in paths:
        target = path.parent / "done" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            replace(path, target)
            moved += 1
        except FileNotFoundError:
            continue
    return moved


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'note'}: {e['msg']}" for e in exc.errors()[:3]
        )
    return str(exc)
