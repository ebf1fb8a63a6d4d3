"""The long-lived child of `worker supervise` (normally `worker serve`).

This is the one module besides worker/process/proc.py that starts processes, on purpose:
`run_process` runs a command to its end and reads its output, while the supervisor must start
a process, return at once, poll it for years and never read what it prints (its output may
quote prompts and messages, which the supervisor must not see). The child's stdout and stderr
go straight to a log file the supervisor only appends to. Like run_process, the child starts in
its own process group (and, on Windows, its own Job Object: worker/process/platform/process.py), so
that what it leaves behind can be ended with it.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from worker.process.platform.process import TreeProcess
from worker.process.proc import redact

log = logging.getLogger(__name__)


class ChildHandle(Protocol):
    pid: int

    def poll(self) -> int | None: ...

    def stop(self, grace_s: float) -> int | None: ...


class Launcher(Protocol):
    def __call__(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], log_path: Path
    ) -> ChildHandle: ...


class Child:
    """A started process. `poll()` never blocks; `stop()` asks, then insists."""

    def __init__(self, proc: TreeProcess[bytes]) -> None:
        self._proc = proc
        self.pid = proc.pid
        self._swept = False

    def poll(self) -> int | None:
        code = self._proc.poll()
        if code is not None and not self._swept:
            # The leader is gone; agents it started may live on in its group. End them too.
            self._swept = True
            self._proc.ask_tree()
        return code

    def stop(self, grace_s: float) -> int | None:
        """SIGTERM (Windows: CTRL_BREAK_EVENT) to the child alone, then its whole tree ended
        by force after `grace_s`.

        Like systemd's KillMode=mixed: `worker serve` gets the time to stop its agent itself,
        keep the work and release the task; signalling the agents directly at the same moment
        would race that and could turn a stop into a failed task."""
        if self.poll() is not None:
            return self._proc.returncode
        self._proc.ask_leader()
        try:
            code = self._proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            log.warning("child %s ignored the stop request for %ss; killing it", self.pid, grace_s)
            self._proc.end_tree(0.0)
            code = self._proc.wait()
        self.poll()  # sweep whatever the child left behind in its group
        return code


def launch(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], log_path: Path
) -> ChildHandle:
    """Start `argv` in its own process group with output appended to `log_path`."""
    argv = [str(part) for part in argv]
    log.info("starting child: %s (cwd=%s)", redact(" ".join(argv)), cwd)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as out:
        proc: TreeProcess[bytes] = TreeProcess(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Child(proc)
