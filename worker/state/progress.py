"""What a running task is doing, as it goes: one heartbeat row per run, tools per iteration,
and a journal of what happened.

The task loop tells its `Progress` when an iteration starts (`step`), each agent event
(`event`) and each supervisor finding (`finding`). `Tracker` keeps that in the run's row of
`run_progress` (for `worker status` from another terminal or machine), in `iteration_tools`
(for `worker show`) and, one line per happening (an iteration's start and end, a tool call, a
STATUS block, a finding) with its own time, in `run_events` (for `worker log -f`); and it
hands it on to a display (`worker.cli.ui`), if any. Heartbeat writes are throttled (a journal line
is written at once); a failed write is logged and never stops the task.

The tables and their readers are in `progress_rows`, the step and the words of its lines in
`progress_step`, the reviewers' step in `progress_review`; their names stay importable here.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time

from worker.models import AgentEvent, EventKind, Task
from worker.process.proc import redact
from worker.state.progress_review import ReviewStep, review_step
from worker.state.progress_rows import (
    MIGRATIONS,
    ensure,
    events_after,
    last_event_id,
    progress_of,
    tools_of,
)
from worker.state.progress_step import Display, Step, finding_line, status_line, tool_summary
from worker.state.store import Store

__all__ = [
    "MIGRATIONS",
    "Display",
    "ReviewStep",
    "Step",
    "Tracker",
    "ensure",
    "events_after",
    "finding_line",
    "last_event_id",
    "progress_of",
    "review_step",
    "status_line",
    "tool_summary",
    "tools_of",
]

log = logging.getLogger(__name__)

_WRITE_EVERY_S = 2.0  # at most one heartbeat write per 2 s while events stream in
_WRITES = ("edit", "write", "replace", "patch", "file_change")


class Tracker:
    """The loop's `Progress`: heartbeat rows in the store, and a display if one is given."""

    def __init__(
        self, store: Store, run_id: int, task: Task, display: Display | None = None
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.display = display
        self.now = Step(task.id, task.title)
        self._source = task.source
        self._written = 0.0
        try:
            ensure(store)
        except sqlite3.Error as exc:
            log.warning("progress: cannot prepare its tables: %s", exc)

    # -- what the loop calls ----------------------------------------------------------------
    def step(
        self, mode: str, model: str, iteration: int, limit: int, seq: int, cost: float
    ) -> None:
        self.now = Step(
            self.now.task_id,
            self.now.title,
            mode,
            model,
            iteration,
            limit,
            seq,
            cost,
            started_at=self.now.started_at,
            finding=self.now.finding,  # the last finding stays until a new one comes
        )
        if self.display is not None:
            self.display.step(self.now)
        self._write(force=True, said=f"{mode} ({model}) iteration {iteration}/{limit} started")

    def event(self, event: AgentEvent) -> None:
        now = self.now
        if event.kind is EventKind.TOOL_CALL and event.tool:
            now.tool = tool_summary(event)
            now.tools[event.tool] = now.tools.get(event.tool, 0) + 1
            path = (event.args or {}).get("file_path") or (event.args or {}).get("path")
            writes = any(w in event.tool.lower() for w in _WRITES)
            if writes and isinstance(path, str) and path not in now.files:
                now.files.append(path)
        now.input_tokens = max(now.input_tokens, event.input_tokens or 0)
        now.output_tokens += event.output_tokens or 0
        if event.cost_usd is not None:
            now.cost_usd = event.cost_usd
        said = self._said(event)
        if said is not None:
            said = redact(said)  # a tool's argument may carry a token: never shown or kept
        if self.display is not None:
            self.display.changed(now)
            if said is not None:
                self.display.said(now, said)
        self._write(force=event.kind is EventKind.TOOL_CALL, said=said)

    def _said(self, event: AgentEvent) -> str | None:
        """The line this event is worth on its own: a tool call, or a STATUS block the first
        time the iteration prints it (Claude repeats it in its result)."""
        if event.kind is EventKind.TOOL_CALL and event.tool:
            return f"tool {self.now.tool}"
        status = status_line(event)
        if status is None or status == self.now.status:
            return None
        self.now.status = status
        return status

    def finding(self, text: str) -> None:
        finding = " ".join(text.split())[:200]
        if finding == self.now.finding:
            return  # said already (a stop reason comes with every later event)
        self.now.finding = finding
        if self.display is not None:
            self.display.changed(self.now)
        self._write(force=True, said=redact(finding_line(finding)))  # it may quote a call

    def start(self, text: str) -> None:
        if self.display is not None:
            self.display.start(text)

    def update(self, text: str) -> None:
        if self.display is not None:
            self.display.update(text)

    def stop(self, text: str) -> None:
        if self.display is not None:
            self.display.stop(text)
        self.now.tool = None
        self._write(force=True, said=redact(text))  # an agent's error may be in it
        self._save_tools()

    # -- the store --------------------------------------------------------------------------
    def _write(self, force: bool = False, said: str | None = None) -> None:
        """The heartbeat row (throttled unless forced) and, with `said`, a journal line."""
        at = time.time()
        if said is None and not force and at - self._written < _WRITE_EVERY_S:
            return
        self._written = at
        s = self.now
        try:
            with self.store.transaction() as db:
                if said is not None:
                    db.execute(
                        "INSERT INTO run_events(run_id, at, text) VALUES (?, ?, ?)",
                        (self.run_id, at, said[:500]),
                    )
                db.execute(
                    "INSERT OR REPLACE INTO run_progress(run_id, task_id, title, source, mode,"
                    " model, iteration, max_iterations, started_at, step_started_at, updated_at,"
                    " cost_usd, input_tokens, output_tokens, tool, finding)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        self.run_id,
                        s.task_id,
                        s.title,
                        self._source,
                        s.mode,
                        s.model,
                        s.iteration,
                        s.max_iterations,
                        s.started_at,
                        s.step_started_at,
                        at,
                        s.total_cost,
                        s.input_tokens,
                        s.output_tokens,
                        s.tool,
                        s.finding,
                    ),
                )
        except sqlite3.Error as exc:
            log.warning("progress: heartbeat not written: %s", exc)

    def _save_tools(self) -> None:
        if not self.now.seq:
            return
        try:
            with self.store.transaction() as db:
                db.execute(
                    "INSERT OR REPLACE INTO iteration_tools(run_id, seq, tools, files)"
                    " VALUES (?, ?, ?, ?)",
                    (
                        self.run_id,
                        self.now.seq,
                        json.dumps(self.now.tools),
                        json.dumps(self.now.files),
                    ),
                )
        except sqlite3.Error as exc:
            log.warning("progress: tools of iteration %s not written: %s", self.now.seq, exc)
