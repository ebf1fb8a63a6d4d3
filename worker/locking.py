"""The workspace's run lock: one run (or one wait-state edit) at a time per workspace.

An OS lock (filelock), taken without waiting: when another process holds it the caller gets
LockHeld, which exits 75 (EX_TEMPFAIL in BSD sysexits.h: try again later).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from worker.errors import LockHeld
from worker.statedir import migrate_legacy

if TYPE_CHECKING:
    from worker.config import Settings


@contextlib.contextmanager
def workspace_lock(settings: Settings, busy: str | None = None) -> Iterator[None]:
    """Hold `<state>/run.lock` for the block; `busy` is the message when it is taken. The
    first holder moves a workspace's old `.worker/` state folder into the state folder."""
    from filelock import FileLock, Timeout

    migrate_legacy(settings.workspace, settings.state)
    settings.state.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(settings.state / "run.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise LockHeld(
            busy or f"another worker run holds the lock of {settings.workspace}; try again later"
        ) from None
    try:
        yield
    finally:
        lock.release()
