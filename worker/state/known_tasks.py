"""The task ids this workspace knows, so that an order for a typo is refused, not kept.

Known: the inbox's messages (queued or claimed), the waiting tasks, and every task a run or a
claim has recorded (GitHub issues included). Read only: nothing is created or moved.
"""

from __future__ import annotations

import contextlib
import sqlite3

from worker.config import Settings
from worker.errors import MalformedInput, UsageError
from worker.state.fsutil import json_files
from worker.waits.state import load_wait_state, wait_state_files

_SHOWN = 15


def known_task_ids(settings: Settings) -> list[str]:
    """Every task id known here, the most recently seen first where that is known."""
    found: dict[str, None] = {}
    for folder in (settings.inbox, settings.inbox / "claimed"):
        found.update(dict.fromkeys(path.stem for path in json_files(folder)))
    for path in wait_state_files(settings.wait_states):
        found[path.stem] = None  # a wait may be named by its file too
        with contextlib.suppress(MalformedInput):
            found[load_wait_state(path).task_id] = None
    found.update(dict.fromkeys(_recorded(settings)))
    return list(found)


def require_known(settings: Settings, task_id: str, *, force: bool = False) -> None:
    """UsageError (exit 2) naming the known ids, unless the id is known, `*`, or forced."""
    if force or task_id == "*":
        return
    known = known_task_ids(settings)
    if task_id in known or task_id.removesuffix(".json") in known:
        return
    shown = ", ".join(known[:_SHOWN]) + (" ..." if len(known) > _SHOWN else "")
    raise UsageError(
        f"no task {task_id!r} is known here (known: {shown or 'none'}); "
        "add --force to leave the order for a task not seen yet"
    )


def _recorded(settings: Settings) -> list[str]:
    if not settings.db_path.exists():
        return []
    try:
        db = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True)
        try:
            rows = db.execute(
                "SELECT task_id FROM (SELECT task_id, claimed_at AS at FROM claims"
                " UNION ALL SELECT task_id, started_at AS at FROM runs"
                " WHERE task_id IS NOT NULL) GROUP BY task_id ORDER BY MAX(at) DESC LIMIT 500"
            ).fetchall()
        finally:
            db.close()
    except sqlite3.Error:
        return []
    return [row[0] for row in rows]
