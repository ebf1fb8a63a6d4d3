"""worker's own record of each wait state, in SQLite: the authority on what a wait is.

The wait-state file keeps the specification's readable format in `wait_states/`, a folder the
agent may be able to write. So when worker saves a wait it also records the exact text it
wrote; every reader takes the wait from that record, never from the file alone:

- a file with no record was not written by worker (an agent queueing itself a task, a file
  copied by hand): it is refused, moved to `rejected/` with `WAIT_STATE_UNRECORDED`;
- a file that differs from its record was edited (an earlier resume time, other approvers):
  the edit is ignored, the edited copy kept in `rejected/` with `WAIT_STATE_EDITED`, and the
  file written back as recorded;
- a record whose file is gone ended (the resumed run, an expiry, a cancel each drop it).

A record also keeps the version of the checks its wait passed when written
(`validate.RULES`): read back under the same version, they are not run again. And it keeps
the signature of the file when it was last found equal to the record (`fsutil.signature`,
taken before that read, once the file had settled): a file with the same signature now has
not been changed since, so phase 0 takes it as recorded with one `lstat` instead of a read.
Any write to the file (an edit in place, a rename over it, a symbolic link) changes the
signature, and the file is read and compared again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worker.errors import MalformedInput
from worker.state.fsutil import (
    atomic_write_text,
    is_link,
    quarantine,
    read_text,
    settled,
    signature,
)
from worker.state.store import Store
from worker.waits.ledger import Ledger, WaitCode
from worker.waits.state import (
    WaitState,
    complete,
    file_name,
    from_record,
    load_wait_state,
    wait_state_files,
)
from worker.waits.validate import RULES

if TYPE_CHECKING:
    from worker.config import Settings

log = logging.getLogger(__name__)

UNRECORDED = WaitCode.WAIT_STATE_UNRECORDED.value
EDITED = WaitCode.WAIT_STATE_EDITED.value


@contextlib.contextmanager
def _store(settings: Settings, store: Store | None) -> Iterator[Store]:
    if store is not None:
        yield store
        return
    with Store(settings.db_path) as opened:
        yield opened


def _ensure(store: Store) -> None:
    Ledger(store)  # runs the ledger's migrations, `wait_records` among them


def save_wait(
    settings: Settings, state: WaitState, store: Store | None = None, name: str | None = None
) -> Path:
    """Record the wait, then write its file (named after the task, or `name`): a reader never
    sees a file of worker's without its record."""
    text = complete(state, settings.waits.expiry_days)
    path = settings.wait_states / (name or file_name(state.task_id))
    if is_link(path.parent, "write a wait state"):
        raise OSError(f"{path.parent} is a symbolic link: worker does not write through it")
    with _store(settings, store) as db:
        _ensure(db)
        with db.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO wait_records(file, task_id, text, saved_at, rules)"
                " VALUES (?, ?, ?, ?, ?)",
                (path.name, state.task_id, text, time.time(), RULES),  # `complete` checked it
            )
    atomic_write_text(path, text)
    return path


def adopt_on_upgrade(settings: Settings, store: Store) -> list[str]:
    """Once, in a database that knew waits before records existed: take the wait-state files
    present as recorded (they were trusted as they are until then); return their names."""
    _ensure(store)
    if store.db.execute("SELECT 1 FROM wait_records_seed").fetchone() is None:
        return []
    adopted = []
    with store.transaction() as db:
        for path in wait_state_files(settings.wait_states):
            try:
                state = load_wait_state(path)
                text = path.read_text(encoding="utf-8")
            except (MalformedInput, OSError, UnicodeDecodeError):
                continue  # phase 0 sets it aside with its reason
            db.execute(
                "INSERT OR IGNORE INTO wait_records(file, task_id, text, saved_at)"
                " VALUES (?, ?, ?, ?)",
                (path.name, state.task_id, text, time.time()),
            )
            adopted.append(path.name)
        db.execute("DELETE FROM wait_records_seed")
    if adopted:
        log.warning("waits: %d wait state(s) adopted on upgrade: %s", len(adopted), adopted)
    return adopted


def forget(settings: Settings, path: Path, store: Store | None = None) -> None:
    """The wait at `path` has ended: its record goes (the file is moved or removed by the
    caller)."""
    if store is None and not settings.db_path.exists():
        return
    with _store(settings, store) as db:
        _ensure(db)
        with db.transaction() as conn:
            conn.execute("DELETE FROM wait_records WHERE file = ?", (path.name,))


class Records(dict[str, str]):
    """File name -> the text worker wrote; `checked`: the names whose text passed the current
    rules when it was written (`validate.RULES`), read back without checking them again;
    `sigs`: the signature of each file when it was last found as recorded; `verified`: the
    files `check` has just found as recorded, with their signature, for `remember_verified`."""

    checked: frozenset[str] = frozenset()

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.sigs: dict[str, bytes] = {}
        self.verified: list[tuple[str, bytes, str]] = []


_SELECT = "SELECT file, text, rules FROM wait_records"
_now_ns = time.time_ns


def recorded(settings: Settings, store: Store | None = None) -> Records:
    """File name -> the text worker wrote. Without a store (a dry run, a read-only command)
    the database is read without being created or changed."""
    if store is not None:
        _ensure(store)
        cursor = store.db.cursor()
        cursor.row_factory = None  # plain tuples, not a `sqlite3.Row` each
        rows = cursor.execute("SELECT file, text, rules, sig FROM wait_records").fetchall()
        found = _records(rows)
        found.sigs = {row[0]: row[3] for row in rows if row[3] is not None}
        return found
    if not settings.db_path.exists():
        return Records()
    import sqlite3  # only with a database to read

    uri = f"{settings.db_path.resolve().as_uri()}?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            try:
                return _records(conn.execute(_SELECT).fetchall())
            except sqlite3.OperationalError:  # records from before their rules were kept
                return Records(conn.execute("SELECT file, text FROM wait_records").fetchall())
    except sqlite3.Error:
        return Records()  # an older database without the table: nothing recorded yet


def _records(rows: list[tuple[str, str, int]]) -> Records:
    found = Records((row[0], row[1]) for row in rows)
    found.checked = frozenset(row[0] for row in rows if row[2] == RULES)
    return found


def check(
    path: Path, records: dict[str, str], dir_fd: int | None = None
) -> tuple[WaitState | None, str | None]:
    """The wait at `path` as recorded, and what is wrong with the file (None: nothing).
    `dir_fd`: its folder, opened (`fsutil.opened_folder`)."""
    name = path.name
    text = records.get(name)
    if text is None:
        problem = (
            f"{name}: {UNRECORDED}: worker has no record of this wait (a wait state is "
            "written by worker itself, never taken from a file)"
        )
        try:
            load_wait_state(path)
        except MalformedInput as exc:  # say what else is wrong with it, naming the field
            problem += f"; besides, {exc}"
        return None, problem
    if name in getattr(records, "checked", ()):  # it passed the current rules when written
        state = from_record(text)
    else:
        state = WaitState.model_validate_json(text)
    same, sig = _signature_check(name, records, dir_fd)
    if same:
        return state, None  # not changed since it was found as recorded
    try:
        actual = read_text(path if dir_fd is None else name, dir_fd)
    except (OSError, UnicodeDecodeError):
        actual = None
    if actual != text:
        return state, (
            f"{name}: {EDITED}: the file was changed outside worker; the change is "
            "ignored and the recorded wait kept"
        )
    if sig is not None and isinstance(records, Records):
        records.verified.append((name, sig, text))
    return state, None


def _signature_check(
    name: str, records: dict[str, str], dir_fd: int | None
) -> tuple[bool, bytes | None]:
    """(True, _): the file has the signature it had when last found as recorded. Else
    (False, its signature, if it is settled: worth keeping should the read find it as
    recorded). Only with the records of a store and the folder opened."""
    if dir_fd is None or not isinstance(records, Records):
        return False, None
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False, None  # the read says what is wrong
    sig = signature(st)
    if records.sigs.get(name) == sig:
        return True, sig
    return False, sig if settled(st, _now_ns()) else None


def remember_verified(store: Store, records: Records) -> None:
    """Keep the signatures of the files `check` has just found as recorded, for the records
    that still hold the text compared (a record saved again meanwhile has none)."""
    if not records.verified:
        return
    import sqlite3  # loaded with the store's connection already

    try:
        with store.transaction() as db:
            db.executemany(
                "UPDATE wait_records SET sig = ? WHERE file = ? AND text = ?",
                [(sig, name, text) for name, sig, text in records.verified],
            )
    except sqlite3.Error as exc:  # the next run reads those files again
        log.warning("waits: signatures of the checked files not kept: %s", exc)
    records.verified.clear()


def enforce(path: Path, records: dict[str, str], problem: str) -> None:
    """Set a refused or edited file aside (`rejected/`, with the reason) and write the
    recorded wait back in its place."""
    log.warning("wait state %s", problem)
    quarantine(path, path.parent / "rejected", problem)
    text = records.get(path.name)
    if text is not None:
        atomic_write_text(path, text)


def recorded_state(settings: Settings, path: Path, store: Store | None = None) -> WaitState:
    """The wait at `path` as worker recorded it; MalformedInput when there is no record."""
    state, _ = check(path, recorded(settings, store))
    if state is None:
        raise MalformedInput(f"{path.name}: {UNRECORDED}: worker has no record of this wait")
    return state


def trusted(
    settings: Settings, paths: list[Path], store: Store | None = None
) -> list[tuple[Path, WaitState]]:
    """The recorded waits among `paths` (what a reader that changes nothing may use)."""
    records = recorded(settings, store)
    found = []
    for path in paths:
        state, _ = check(path, records)
        if state is not None:
            found.append((path, state))
    return found
