"""The live supervisor of one task: the `TaskSupervisor` the task loop talks to.

While the agent runs, every event goes through the detectors (O(1) each) and every
`radio_check_events` events a radio check decides whether to cut the agent short (an urgent
loop, or the PACE ladder reaching emergency). After each iteration it judges progress (the
stall counter), picks the steering for the next prompt under the per-type cooldown, and
writes this machine's status report.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from worker.models import AgentEvent, InfraFailure, Task
from worker.supervision.anomaly import WARN, Anomaly
from worker.supervision.ladder import pace_rank, stall_step
from worker.supervision.protocol import IterationView
from worker.supervision.reports import StatusReport, now_utc, worst, write_report
from worker.supervision.settings import SupervisionSettings
from worker.supervision.watch import Watch, select

log = logging.getLogger(__name__)

_BAD_STATUSES = {"failure"}
_AMBER_STATUSES = {"escalate", "wait"}


class Supervisor:
    def __init__(
        self,
        settings: SupervisionSettings,
        task: Task,
        run_id: int | None = None,
        *,
        machine_id: str,
        reports_dir: Path | None,
        clock: Callable[[], datetime] = now_utc,
    ) -> None:
        self.s = settings
        self.task = task
        self.run_id = run_id
        self.machine_id = machine_id
        self.reports_dir = reports_dir if settings.reports else None
        self.clock = clock
        self.watch = Watch(settings)
        self.turn = 0  # iterations judged: the cooldown's clock (steering reaches the agent
        # only through the next prompt)
        self.stopped: str | None = None  # the stop reason given during this iteration
        self._since_check = 0
        self._stall = 0
        self._stall_start = 0
        self._files: frozenset[str] = frozenset()
        self._digest: str | None = None
        self._progress_mark = 0
        self._started = clock()
        self._t0 = time.monotonic()
        self._last: IterationView | None = None
        self._health = "green"
        self._last_stop: str | None = None  # the last stop in this task, for the report

    # -- TaskSupervisor -------------------------------------------------------------------

    def on_event(self, event: AgentEvent) -> str | None:
        if self.stopped is not None:
            return self.stopped
        self.watch.observe(event)
        self._since_check += 1
        if self._since_check < self.s.radio_check_events:
            return None
        self._since_check = 0
        reason = self.watch.radio_check()
        if reason is not None:
            self.stopped = self._last_stop = reason
            log.warning("%s", reason)
            self._write(health="red")
        return reason

    def after_iteration(self, view: IterationView) -> list[str]:
        self.turn += 1
        self._last = view
        self.watch.escalations = view.escalations
        self.watch.detectors.model_hint = view.model
        if self.watch.detectors.model is None:
            self.watch.detectors.model = view.model
        self._judge_progress(view)
        self.watch.end_iteration()
        found = self.watch.drain()
        steering = self.watch.steer(found, self.turn)
        pace = self.watch.steer_pace(self.turn)
        if pace is not None:
            steering.append(pace)
        lines = select(steering, self.s.max_steering_lines)
        self._health = self._supervisor_health(found)
        self._write(health=None)
        self.stopped = None
        self._since_check = 0
        return lines

    def infra_failure(self) -> InfraFailure | None:
        """A CLI-level error that repeated across iterations (urgent), for the task loop to
        treat as an infrastructure failure rather than the task's; None otherwise."""
        return self.watch.detectors.infra

    def finish(self, outcome: str) -> list[str]:
        self._write(health=None, outcome=outcome)
        return [anomaly.summary() for anomaly in self.watch.episodes.values()]

    # -- judgements -----------------------------------------------------------------------

    def _judge_progress(self, view: IterationView) -> None:
        """Iterations without file changes; a change decrements (Magentic-One).

        Progress is any of: the set of changed files differs from last time (it is the whole
        uncommitted change, not this iteration's), the diff digest changed, or a file-changing
        tool succeeded during the iteration.
        """
        files = frozenset(view.changed_files)
        progressed = (
            files != self._files
            or (view.diff_digest is not None and view.diff_digest != self._digest)
            or self.watch.detectors.progress > self._progress_mark
        )
        self._files, self._digest = files, view.diff_digest
        self._progress_mark = self.watch.detectors.progress
        before = self._stall
        self._stall = stall_step(self._stall, progressed)
        limit = self.s.stall_iterations
        if self._stall < limit:
            return
        if before < limit:
            self._stall_start = max(self.watch.detectors.seq, 0)
        seq = max(self.watch.detectors.seq, 0)
        self.watch.note(
            Anomaly(
                "stall",
                WARN,
                "iterations",
                self._stall_start,
                seq,
                self._stall,
                0,
                {"iterations": self._stall, "reason": view.status.reason, "mode": view.mode},
            )
        )

    def _supervisor_health(self, found: list[Anomaly]) -> str:
        pace = pace_rank(self.watch.pace())
        if self.stopped or pace >= 3 or any(a.level != WARN for a in found):
            return "red"
        if found or pace >= 1:
            return "amber"
        return "green"

    @staticmethod
    def _loop_health(view: IterationView | None, outcome: str | None) -> str:
        if view is None:
            return "green"
        result, status = view.result, view.status.status
        if result.is_error or result.timed_out or status in _BAD_STATUSES or outcome == "failure":
            return "red"
        if status in _AMBER_STATUSES or status is None or view.status.reason_code:
            return "amber"
        return "green"

    # -- report ---------------------------------------------------------------------------

    def _write(self, health: str | None, outcome: str | None = None) -> None:
        if self.reports_dir is None:
            return
        view = self._last
        detectors = self.watch.detectors
        loop_health = self._loop_health(view, outcome)
        mine = health or self._health
        report = StatusReport(
            machine_id=self.machine_id,
            run_id=self.run_id,
            state="finished" if outcome is not None else "running",
            health=worst(loop_health, mine),
            loop_health=worst(loop_health),
            supervisor_health=worst(mine) if mine != loop_health else None,
            task_id=self.task.id,
            task_title=self.task.title[:200],
            task_source=self.task.source,
            mode=view.mode if view else None,
            model=detectors.model or (view.model if view else None),
            iteration=view.iteration if view else 0,
            max_iterations=view.max_iterations if view else None,
            escalations=self.watch.escalations,
            pace=self.watch.pace(),
            last_anomalies=[a.summary() for a in list(self.watch.episodes.values())[-5:]],
            stopped=self._last_stop,
            outcome=outcome,
            context_fill=detectors.context_fill,
            context_tokens=detectors.context_tokens,
            context_window=detectors.context_window,
            cost_usd=view.cost_so_far if view else 0.0,
            started_at=self._started,
            updated_at=self.clock(),
            elapsed_s=round(time.monotonic() - self._t0, 3),
        )
        try:
            write_report(self.reports_dir, report)
        except OSError as exc:  # a report is for people watching; never fail the task on it
            log.warning("cannot write the status report in %s: %s", self.reports_dir, exc)
