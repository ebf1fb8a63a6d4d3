"""What `worker supervise` checks before it starts: not root, and only one per workspace."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from worker.errors import ConfigError
from worker.process.locking import held


def current_euid() -> int | None:
    geteuid = getattr(os, "geteuid", None)  # absent on Windows
    return geteuid() if geteuid is not None else None


def refuse_root(allow_root: bool, euid: Callable[[], int | None] = current_euid) -> None:
    """Spec "Security Rules": run as a non-root user. Exit 78, so systemd does not retry it."""
    if euid() == 0 and not allow_root:
        raise ConfigError(
            "worker supervise refuses to run as root: the agents it keeps running could change"
            " anything on this machine. Run it as an unprivileged user, or pass --allow-root"
            " (or set daemon.allow_root = true) if you really mean it."
        )


@contextmanager
def single_supervisor(state_dir: Path) -> Iterator[None]:
    """One supervisor per workspace: a second one exits 75 (EX_TEMPFAIL, retry later), which
    also makes a periodic cron line a harmless watchdog."""
    path = state_dir / "daemon" / "supervise.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    busy = (
        f"another worker supervise is running for this workspace ({path} is locked);"
        " `worker supervise status` shows it"
    )
    with held(path, busy):
        yield
