"""Control orders from the local intercom: a note whose first word is `/stop`, `/cancel`,
`/pause` or `/resume` (`worker intercom send TASK "/pause back after lunch"`).

The notes stay where the intercom keeps them (`<state>/intercom/<task>/*.json`); an order is
consumed like any other (its note moves to `done/` beside it, with the outcome). Such a note
is an order and nothing else: the `intercom_message` condition passes over it
(`worker.waits.builtin.IntercomMessage`), so it never also resumes a wait as its answer.

The stop watcher reads this every second: a file whose bytes cannot hold an order (its text
does not start with `/`) is not parsed.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from pydantic import ValidationError

from worker.config import Settings
from worker.errors import MalformedInput
from worker.kernel.control import may_order, order_of_text
from worker.kernel.model import ControlOrder, Order
from worker.state.fsutil import json_files, subfolders
from worker.waits import authored, intercom, record
from worker.waits.intercom import Note

log = logging.getLogger(__name__)

LOCAL_USER = "the local user"
# `"text": "/...`, also with a JSON-escaped slash (`"\/pause"`) or leading blanks.
_NEEDLE = re.compile(rb'"text"\s*:\s*"(?:\s|\\[nrt])*\\?/')
_REFUSED: set[Path] = set()


def note_order(note: Note) -> tuple[Order, str] | None:
    """The order a note carries, or None for an ordinary message (or an approval)."""
    return order_of_text(note.text) if note.kind == "message" else None


def read(settings: Settings, approvers: list[str]) -> list[ControlOrder]:
    """Every unread order note. The local user (a note without `by`) may give any order; a
    named sender follows `control.may_order`, as in the inbox."""
    orders = []
    signed: set[str] | None = None  # read once, and only when an order-like note is there
    for folder in subfolders(intercom.root(settings)):
        for path in json_files(folder):
            raw = _order_bytes(path)
            if raw is None:
                continue
            signed = authored.signed(settings) if signed is None else signed
            note = _order_note(path, raw, signed)
            if note is None:
                continue
            found = note_order(note)
            if found is None:
                continue
            order, reason = found
            task_id = note.task_id or _waiting_task(settings, folder)
            trusted = bool(task_id) and (note.by is None or may_order(order, note.by, approvers))
            orders.append(
                ControlOrder(
                    f"intercom-{note.id}",
                    order,
                    task_id or "?",
                    "intercom",
                    reason[:500],
                    note.by or LOCAL_USER,
                    note.at().timestamp(),
                    trusted,
                    path,
                )
            )
    return orders


def _order_bytes(path: Path) -> bytes | None:
    """The file's bytes when they may hold an order."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None  # consumed meanwhile
    return raw if _NEEDLE.search(raw) else None


def _order_note(path: Path, raw: bytes, signed: set[str]) -> Note | None:
    """The note, when worker's CLI wrote exactly these bytes; a file that merely appeared in
    the folder is never an order."""
    if authored.digest(raw) not in signed:
        if path not in _REFUSED:  # the watcher looks every second: say it once
            _REFUSED.add(path)
            log.warning("intercom: %s", authored.refusal(path.name))
        return None
    try:
        return Note.model_validate_json(raw)
    except ValidationError:
        return None  # phase 0 moves it to `rejected/` with its reason


def _waiting_task(settings: Settings, folder: Path) -> str:
    """A hand-written note without `task_id`: the task whose wait-state file names the folder."""
    try:
        return record.recorded_state(settings, settings.wait_states / f"{folder.name}.json").task_id
    except MalformedInput:
        return ""
