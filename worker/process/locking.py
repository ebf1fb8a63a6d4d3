"""The workspace's run lock: one run (or one wait-state edit) at a time per workspace.

An OS lock on a file, taken without waiting: `flock` on POSIX, `msvcrt.locking` on Windows,
both held by the open file and let go by the OS when the process ends, however it ends. When
another process holds it the caller gets LockHeld, which exits 75 (EX_TEMPFAIL in BSD
sysexits.h: try again later). The standard library's calls, not a locking package: importing
one cost every run about 8 ms.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from worker.errors import LockHeld
from worker.state.statedir import migrate_legacy, migrate_wait_states

if TYPE_CHECKING:
    from worker.config import Settings

# What a lock another process holds looks like: EWOULDBLOCK (= EAGAIN) from flock, EACCES
# from some network file systems and from msvcrt.locking's non-blocking mode (the C runtime's
# `_locking`), EDEADLK (= EDEADLOCK) from its blocking mode, which gives up after ten tries.
_HELD = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES, errno.EDEADLK})

if sys.platform == "win32":
    import msvcrt

    def _lock(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # the first byte, from offset 0

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def held(path: Path, busy: str) -> Iterator[None]:
    """Hold the OS lock of `path` (created if missing, left in place) for the block, or
    raise LockHeld(`busy`) at once when another holder has it; never waits."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by children
    try:
        _lock(fd)
    except OSError as exc:
        os.close(fd)
        if exc.errno in _HELD:
            raise LockHeld(busy) from None
        raise
    try:
        yield
    finally:
        try:
            _unlock(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def held_in_turn(
    path: Path, poll_s: float = 0.1, wait_s: float | None = None, busy: str = "busy"
) -> Iterator[None]:
    """Hold the OS lock of `path` for the block, waiting while another process holds it: work
    that slots (`max_parallel`) must do one at a time, such as the reviewers between tasks.
    With `wait_s`, LockHeld(`busy`) once it is still held after that long."""
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = None if wait_s is None else time.monotonic() + wait_s
    with contextlib.ExitStack() as stack:
        while True:
            try:
                stack.enter_context(held(path, busy))
                break
            except LockHeld:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                time.sleep(poll_s)
        yield


@contextlib.contextmanager
def workspace_lock(
    settings: Settings, busy: str | None = None, wait_s: float = 0.0
) -> Iterator[None]:
    """Hold `<state>/run.lock` for the block; `busy` is the message when it is taken (and
    still taken after `wait_s`). The first holder moves a workspace's old `.worker/` state
    folder into the state folder, and the waits of its old `wait_states/` folder into the
    wait-state folder."""
    migrate_legacy(settings.workspace, settings.state)
    migrate_wait_states(settings)
    settings.state.mkdir(parents=True, exist_ok=True)
    busy = busy or f"another worker run holds the lock of {settings.workspace}; try again later"
    path = settings.state / "run.lock"
    with held(path, busy) if wait_s <= 0 else held_in_turn(path, wait_s=wait_s, busy=busy):
        yield
