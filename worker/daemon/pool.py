"""`worker serve` with `max_parallel` > 1: a `worker run` process per busy slot.

Each slot's task runs in a process of its own (the same `worker run` cron starts), so that a
slot killed (kill -9, the OOM killer) loses its task alone, and the next run recovers it as it
recovers any dead run's (worker/run/slots.py). The pool starts a run; while runs find tasks and
a slot is free it starts the next at once; when one finds nothing to do (it exited), the pool
waits for the interval, a new inbox file or a slot that frees (its own run's, or one that a run
started elsewhere held). A stop asks every run to stop (SIGTERM: each keeps its work and
releases its task), then insists after `daemon.stop_grace_s`.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from worker.config import Settings
from worker.daemon.child import ChildHandle, Launcher, launch
from worker.errors import ExitCode
from worker.state.slot_records import running

log = logging.getLogger(__name__)

_POLL_S = 0.1


@dataclass
class Started:
    child: ChildHandle
    number: int
    took: bool = False  # it took a task (its slot's record named it)


class Pool:
    """Up to `max_parallel` runs at once: `start` starts one, `look` says which took a task
    since, `reap` which ended."""

    def __init__(
        self,
        settings: Settings,
        run_args: list[str],
        stopping: threading.Event,
        launcher: Launcher = launch,
    ) -> None:
        self.settings = settings
        self.argv = [sys.executable, "-m", "worker", "run", "--quiet"]
        self.argv += ["--workspace", str(settings.workspace), *run_args]
        self._stopping = stopping
        self._launch = launcher
        self.children: list[Started] = []
        self.started = 0

    @property
    def free(self) -> int:
        return self.settings.max_parallel - len(self.children)

    @property
    def deciding(self) -> int:
        """The runs started that have not taken a task yet (nor ended)."""
        return sum(not item.took for item in self.children)

    def reap(self) -> list[tuple[Started, int]]:
        """The runs that ended since the last look, with their exit codes."""
        ended = []
        for item in list(self.children):
            code = item.child.poll()
            if code is not None:
                self.children.remove(item)
                ended.append((item, code))
        return ended

    def look(self) -> bool:
        """Mark the runs that took a task (their slot's record names their pid); True when
        one did since the last look."""
        deciding = [item for item in self.children if not item.took]
        if not deciding:
            return False
        pids = {record.pid for record in running(self.settings)}
        took = [item for item in deciding if item.child.pid in pids]
        for item in took:
            item.took = True
        return bool(took)

    def start(self) -> None:
        self.started += 1
        log_path = self.settings.state / "daemon" / "slot-runs.log"
        # A slot's run is worker itself, as cron starts it: worker's environment, tokens
        # included (it keeps them from its agent as any run does).
        env = dict(os.environ)
        child = self._launch(self.argv, cwd=self.settings.workspace, env=env, log_path=log_path)
        self.children.append(Started(child, self.started))

    def stop_all(self) -> None:
        """Ask every run to stop, in parallel (each has the grace time to release its task)."""
        threads = [
            threading.Thread(target=item.child.stop, args=(self.settings.daemon.stop_grace_s,))
            for item in self.children
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.children.clear()


def run_pool(
    pool: Pool,
    stopping: threading.Event,
    interval_s: float,
    wake: Callable[[], bool],
    on_exit: Callable[[int, int, int], bool],
    max_runs: int | None = None,
) -> None:
    """Keep the slots busy until `stopping`, or until `max_runs` runs started and ended:
    `on_exit(number, code, pid)` hears of each run that ended and returns False to end the pool
    (a configuration error): the runs still going are then asked to stop.

    While runs find tasks, two may be deciding at once (the second's start-up overlaps the
    first's scheduling step); once one finds nothing, one at a time, at each interval."""
    due, busy = 0.0, False  # start a run now; no task seen yet
    shut_out = False  # a run found every slot taken by runs started elsewhere (cron)
    while not stopping.is_set():
        if pool.look():
            busy = True
        for item, code in pool.reap():
            busy, shut_out = item.took, code == ExitCode.LOCKED
            due = 0.0 if item.took else time.monotonic() + interval_s
            if not on_exit(item.number, code, item.child.pid):
                stopping.set()
        if shut_out and len(running(pool.settings)) < pool.settings.max_parallel:
            due, shut_out = 0.0, False  # one of them ended: its slot is free
        if stopping.is_set():
            break
        spent = max_runs is not None and pool.started >= max_runs
        if spent and not pool.children:
            return
        room = pool.free > 0 and pool.deciding < (2 if busy else 1)
        if not spent and room and (time.monotonic() >= due or wake()):
            pool.start()
            continue
        stopping.wait(_POLL_S)
    pool.stop_all()
