"""`worker serve`: the batch cycle in a loop, one run at a time, with health signals; with
`max_parallel` > 1, a `worker run` process per busy slot instead (worker/daemon/pool.py).

Each cycle calls `worker.run.runner.run_once` (the same lock and decisions as `worker run`), then
sleeps for `interval_s` or until a new file lands in the inbox. SIGTERM/SIGINT end the loop and
ask the runner (`worker.run.runner.request_stop`) to stop the agent, keep its work and release the
task; see signals.py for why this happens on a watcher thread.

Unexpected exceptions are not caught: a crash is what lets `worker supervise` restart this
process and roll back a broken revision. A configuration error ends the loop with exit 78 (do
not restart); maintenance's set-up problem, though a run's exit 78 too, does not: it stops
maintenance alone, which is passed over until the project changes, and the other sources go on.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from worker.config import Settings
from worker.daemon import health
from worker.daemon.inbox_watch import InboxWatch
from worker.errors import ConfigError, ExitCode, LockHeld, WorkerError
from worker.models import SETUP_PROBLEM
from worker.process.signals import stop_signals
from worker.state.store import Store

log = logging.getLogger(__name__)

RunOnce = Callable[[Settings, Any], Any]
CONFIG_ERROR = "config_error"  # a cycle's outcome that ends the loop (exit 78)
SETUP_OUTCOME = "setup_problem"  # maintenance's checks cannot run: the loop goes on
RequestStop = Callable[[str], None]


@dataclass
class Cycle:
    number: int
    outcome: str
    exit_code: int | None
    detail: str = ""
    run_id: int | None = None  # the run's number, as `worker log` shows it


@dataclass
class ServeReport:
    cycles: int
    exit_code: int
    stopped_by: str
    last: list[Cycle] = field(default_factory=list)


def _runner() -> tuple[RunOnce, Callable[[], Any], RequestStop | None]:
    # Imported on first use: `worker supervise` imports this package but must never load the
    # data plane (sources, agents) into its own process.
    from worker.run import runner

    return runner.run_once, runner.RunOptions, getattr(runner, "request_stop", None)


class Server:
    """The serve loop. Every collaborator is injectable; `run()` is the whole life."""

    def __init__(
        self,
        settings: Settings,
        *,
        run_once: RunOnce | None = None,
        make_options: Callable[[], Any] | None = None,
        request_stop: RequestStop | None = None,
        max_cycles: int | None = None,
        on_cycle: Callable[[Cycle], None] | None = None,
    ) -> None:
        if run_once is None or make_options is None:
            default_run, default_options, default_stop = _runner()
            run_once = run_once or default_run
            make_options = make_options or default_options
            request_stop = request_stop or default_stop
        self.settings = settings
        self.d = settings.daemon
        self._run_once = run_once
        self._make_options = make_options
        self._request_stop = request_stop
        self._max_cycles = max_cycles
        self._on_cycle = on_cycle or (lambda cycle: None)
        self._stopping = threading.Event()
        self._stop_reason = ""
        self._phase = "starting"

    # -- stopping -----------------------------------------------------------------------------
    def stop(self, reason: str) -> None:
        """Thread-safe, not for signal handlers (see signals.py). Asks a running agent to stop."""
        if self._stopping.is_set():
            return
        self._stop_reason = reason
        self._stopping.set()
        if self._phase == "running" and self._request_stop is not None:
            log.info("asking the running task to stop (%s)", reason)
            self._request_stop(reason)

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> ServeReport:
        if self.settings.max_parallel > 1:
            return self._run_slots()
        state = self.settings.state
        store = Store(self.settings.db_path)
        beat = health.Heartbeat(
            lambda: Store(self.settings.db_path), self.d.heartbeat_s, lambda: self._phase
        )
        watch = InboxWatch(self.settings.inbox)
        cycles, exit_code = 0, int(ExitCode.OK)
        last: list[Cycle] = []
        try:
            health.mark_ready(store, state)
            beat.start()
            while not self._stopping.is_set():
                self._phase = "running"
                if self._stopping.is_set():
                    # stop() came between the check above and the phase change: it saw
                    # "idle" and asked no one to stop, so the cycle must not begin.
                    break
                cycle, wait_s = self._one_cycle(cycles + 1)
                self._phase = "idle"
                cycles += 1
                last = [*last[-9:], cycle]
                self._on_cycle(cycle)
                health.beat(store, phase="idle", cycle=cycles, outcome=cycle.outcome)
                if cycle.outcome == CONFIG_ERROR:
                    exit_code = int(ExitCode.CONFIG)  # the supervisor must not restart this
                    self._stop_reason = self._stop_reason or "configuration error"
                    break
                if self._max_cycles is not None and cycles >= self._max_cycles:
                    self._stop_reason = self._stop_reason or f"max cycles ({cycles})"
                    break
                self._wait(wait_s, watch)
        finally:
            self._phase = "stopping"
            beat.stop()
            health.mark_stopped(store, state, self._stop_reason or "crashed")
            store.close()
        return ServeReport(cycles, exit_code, self._stop_reason, last)

    def _run_slots(self) -> ServeReport:
        """`max_parallel` > 1: a `worker run` process per busy slot (worker/daemon/pool.py)."""
        from worker.daemon.pool import Pool, run_pool

        store = Store(self.settings.db_path)
        beat = health.Heartbeat(
            lambda: Store(self.settings.db_path), self.d.heartbeat_s, lambda: self._phase
        )
        options = self._make_options()
        run_args = ["--use-worktree"] if getattr(options, "use_worktree", False) else []
        pool = Pool(self.settings, run_args, self._stopping)
        watch = InboxWatch(self.settings.inbox)
        watch.prime()
        last: list[Cycle] = []
        exit_code = int(ExitCode.OK)

        def on_exit(number: int, code: int, pid: int) -> bool:
            nonlocal exit_code
            outcome = {0: "done", int(ExitCode.LOCKED): "locked"}.get(code, "error")
            if code == ExitCode.CONFIG:
                outcome = SETUP_OUTCOME if _setup_problem(store, pid) else CONFIG_ERROR
            cycle = Cycle(number, outcome, code)
            last[:] = [*last[-9:], cycle]
            self._on_cycle(cycle)
            health.beat(store, phase="running", cycle=number, outcome=cycle.outcome)
            if outcome == CONFIG_ERROR:
                exit_code = int(ExitCode.CONFIG)  # the supervisor must not restart this
                self._stop_reason = self._stop_reason or "configuration error"
                return False
            return True

        try:
            health.mark_ready(store, self.settings.state)
            beat.start()
            self._phase = "running"
            wake = watch.has_new_files
            run_pool(pool, self._stopping, self.d.interval_s, wake, on_exit, self._max_cycles)
            if not self._stopping.is_set():
                self._stop_reason = self._stop_reason or f"max cycles ({pool.started})"
        finally:
            self._phase = "stopping"
            beat.stop()
            health.mark_stopped(store, self.settings.state, self._stop_reason or "crashed")
            store.close()
        return ServeReport(pool.started, exit_code, self._stop_reason, last)

    def _one_cycle(self, number: int) -> tuple[Cycle, float]:
        try:
            report = self._run_once(self.settings, self._make_options())
        except LockHeld as exc:
            log.info("another run holds the workspace lock; retrying in %ss", self.d.busy_retry_s)
            return Cycle(number, "locked", int(ExitCode.LOCKED), str(exc)), self.d.busy_retry_s
        except ConfigError as exc:
            return Cycle(number, CONFIG_ERROR, int(ExitCode.CONFIG), str(exc)), 0.0
        except WorkerError as exc:
            # Expected failures (an outage, a bad message) end this cycle, not the server.
            log.warning("run failed: %s", exc)
            return Cycle(number, "error", int(exc.exit_code), str(exc)), self.d.interval_s
        outcome = str(getattr(report, "outcome", "done"))
        code = getattr(report, "exit_code", 0)
        exit_code = int(code) if code is not None else None
        if SETUP_PROBLEM in getattr(report, "reason_codes", ()):
            outcome = SETUP_OUTCOME
        elif exit_code == ExitCode.CONFIG:
            outcome = CONFIG_ERROR  # the agent cannot start, or its key is refused
        run_id = getattr(report, "run_id", None)
        return Cycle(number, outcome, exit_code, run_id=run_id), self.d.interval_s

    def _wait(self, seconds: float, watch: InboxWatch) -> None:
        """Sleep `seconds`, waking early on a stop request or a new inbox file."""
        deadline = time.monotonic() + seconds
        watch.prime()
        while not self._stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self._stopping.wait(min(left, self.d.inbox_poll_s)):
                return
            if watch.has_new_files():
                log.info("new inbox file: running now")
                return


def _setup_problem(store: Store, pid: int) -> bool:
    """Whether the run of process `pid` (a slot's `worker run`) ended on maintenance's set-up
    problem: its exit 78 is then about maintenance alone, which is passed over from then on."""
    row = store.db.execute(
        "SELECT reason_codes FROM runs WHERE pid = ? ORDER BY id DESC LIMIT 1", (pid,)
    ).fetchone()
    return row is not None and SETUP_PROBLEM in json.loads(row[0] or "[]")


def serve(settings: Settings, **kwargs: Any) -> ServeReport:
    """Run `worker serve` until a signal, a configuration error or `max_cycles`."""
    server = Server(settings, **kwargs)
    with stop_signals(server.stop):
        return server.run()
