"""Where an internal error's traceback goes: a file in the user's state home, named in the one
line the user sees, so a bug report can carry it (the terminal gets no traceback)."""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path

from worker.process.proc import redact
from worker.state.fsutil import atomic_write_text
from worker.state.statedir import state_home


def save_traceback(exc: BaseException, argv: list[str]) -> Path | None:
    """The traceback of `exc` (no local variables, secrets redacted) in
    `<state home>/crashes/`; None when it could not be written."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = state_home() / "crashes" / f"{stamp}-{os.getpid()}.txt"
    text = "".join(
        [
            f"worker {' '.join(argv)}\n",
            *traceback.format_exception(type(exc), exc, exc.__traceback__),
        ]
    )
    try:
        atomic_write_text(path, redact(text))
    except OSError:
        return None
    return path
