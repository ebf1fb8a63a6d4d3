"""SIGTERM/SIGINT (and SIGBREAK on Windows) turned into a callback on an ordinary thread.

A Python signal handler runs between two bytecodes of the main thread, which may at that
moment hold the very lock (an Event's, a logging handler's) that the handler would take, so the
handler only writes one byte to a pipe; a watcher thread reads it and calls `on_signal`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator

_NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT"}
if hasattr(signal, "SIGBREAK"):  # Windows: CTRL_BREAK_EVENT, how a supervisor asks us to stop
    _NAMES[signal.SIGBREAK] = "SIGBREAK"


@contextlib.contextmanager
def stop_signals(on_signal: Callable[[str], None]) -> Iterator[None]:
    """Inside the block, SIGTERM and SIGINT call `on_signal(name)`; outside, the old handlers.

    Outside the main thread (where handlers cannot be set) this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read_fd, write_fd = os.pipe()

    def handler(signum: int, frame: object) -> None:
        with contextlib.suppress(OSError):
            os.write(write_fd, bytes([signum]))

    def watch() -> None:
        while True:
            data = os.read(read_fd, 1)
            if not data or data == b"\0":
                return
            on_signal(_NAMES.get(signal.Signals(data[0]), f"signal {data[0]}"))

    previous = {sig: signal.signal(sig, handler) for sig in _NAMES}
    watcher = threading.Thread(target=watch, name="stop-signals", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        os.write(write_fd, b"\0")  # not a signal number: tells the watcher to finish
        watcher.join(timeout=5.0)
        os.close(write_fd)
        os.close(read_fd)
