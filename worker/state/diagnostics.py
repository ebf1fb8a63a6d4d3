"""worker's own diagnostics in the run's log: `<logs>/run-<id>/worker.log`, at the level the
command line or WORKER_LOG_LEVEL chose (warning by default), secrets masked. The file (and
its folder) is made by the first line written: a run with nothing to say leaves nothing."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from io import TextIOWrapper
from pathlib import Path

from worker.process.lazyimport import lazy

# The process layer, only when a line is written: an idle run imports none of it.
_proc = lazy("worker.process.proc")


class RunLogHandler(logging.FileHandler):
    """Appends `time LEVEL logger: message` lines to a run's `worker.log`."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, encoding="utf-8", delay=True)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def _open(self) -> TextIOWrapper:
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()

    def format(self, record: logging.LogRecord) -> str:
        return str(_proc.redact(super().format(record)))


@contextlib.contextmanager
def run_diagnostics(path: Path) -> Iterator[None]:
    """worker's log records go to `path` too while the block runs."""
    logger = logging.getLogger("worker")
    handler = RunLogHandler(path)
    handler.setLevel(logger.getEffectiveLevel())
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        handler.close()
