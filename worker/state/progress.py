"""What a running task is doing, as it goes: one heartbeat row per run, tools per iteration,
and a journal of what happened.

The task loop tells its `Progress` when an iteration starts (`step`), each agent event
(`event`) and each supervisor finding (`finding`). `Tracker` keeps that in the run's row of
`run_progress` (for `worker status` from another terminal or machine), in `iteration_tools`
(for `worker show`) and, one line per happening (an iteration's start and end, a tool call, a
STATUS block, a finding) with its own time, in `run_events` (for `worker log -f`); and it
hands it on to a display (`worker.cli.ui`), if any. Heartbeat writes are throttled (a journal line
is written at once); a failed write is logged and never stops the task.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from worker.models import AgentEvent, EventKind, Task
from worker.process.proc import redact
from worker.state.store import Store, script
from worker.status import parse_status

log = logging.getLogger(__name__)

_WRITE_EVERY_S = 2.0  # at most one heartbeat write per 2 s while events stream in
_ARG_KEYS = ("command", "file_path", "path", "notebook_path", "pattern", "url", "query", "prompt")
_WRITES = ("edit", "write", "replace", "patch", "file_change")


def _v1(db: sqlite3.Connection) -> None:
    script(
        db,
        """
        CREATE TABLE run_progress (
            run_id INTEGER PRIMARY KEY,
            task_id TEXT NOT NULL,
            title TEXT NOT NULL DEFAULT '',
            source TEXT NOT NULL DEFAULT '',
            mode TEXT,
            model TEXT,
            iteration INTEGER NOT NULL DEFAULT 0,
            max_iterations INTEGER NOT NULL DEFAULT 0,
            started_at REAL NOT NULL,
            step_started_at REAL,
            updated_at REAL NOT NULL,
            cost_usd REAL NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            tool TEXT,
            finding TEXT
        );
        CREATE TABLE iteration_tools (
            run_id INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            tools TEXT NOT NULL DEFAULT '{}',
            files TEXT NOT NULL DEFAULT '[]',
            PRIMARY KEY (run_id, seq)
        );
        """,
    )


def _v2(db: sqlite3.Connection) -> None:
    script(
        db,
        """
        CREATE TABLE run_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id INTEGER NOT NULL,
            at REAL NOT NULL,
            text TEXT NOT NULL
        );
        CREATE INDEX run_events_by_run ON run_events(run_id, id);
        """,
    )


MIGRATIONS = [_v1, _v2]


def ensure(store: Store) -> None:
    store.ensure("operator", MIGRATIONS)


@dataclass
class Step:
    """Where a task stands: the iteration running now and what its agent does."""

    task_id: str
    title: str
    mode: str = ""
    model: str = ""
    iteration: int = 0
    max_iterations: int = 0
    seq: int = 0
    cost_before: float = 0.0  # the task's cost before this iteration
    started_at: float = field(default_factory=time.time)
    step_started_at: float = field(default_factory=time.time)
    cost_usd: float = 0.0  # this iteration's, once known
    input_tokens: int = 0
    output_tokens: int = 0
    tool: str | None = None  # `Bash: pytest -q`
    finding: str | None = None
    tools: dict[str, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    status: str | None = None  # the STATUS line the agent printed in this iteration

    @property
    def total_cost(self) -> float:
        return self.cost_before + self.cost_usd


class Display(Protocol):
    """Where progress is shown (`worker.cli.ui.LiveProgress`); any method may do nothing."""

    def step(self, step: Step) -> None: ...
    def changed(self, step: Step) -> None: ...
    def said(self, step: Step, text: str) -> None: ...
    def phase(self, name: str) -> None: ...
    def phase_end(self, text: str | None) -> None: ...
    def start(self, text: str) -> None: ...
    def update(self, text: str) -> None: ...
    def stop(self, text: str) -> None: ...


def tool_summary(event: AgentEvent, width: int = 60) -> str:
    """`Bash: pytest -q`: the tool and the first telling argument, on one short line."""
    args = event.args or {}
    value = next((args[k] for k in _ARG_KEYS if isinstance(args.get(k), str) and args[k]), "")
    text = " ".join(str(value).split())
    if len(text) > width:
        text = text[: width - 1] + "…"
    return f"{event.tool}: {text}" if text else str(event.tool)


def finding_line(finding: str) -> str:
    """`supervisor: ...`, unless the finding says who it is from already."""
    said = finding.lstrip("[ ").lower().startswith("supervisor")
    return finding if said else f"supervisor: {finding}"


def status_line(event: AgentEvent) -> str | None:
    """`STATUS: continue - halfway` when this event's text holds a complete STATUS block."""
    if event.kind not in (EventKind.TEXT, EventKind.RESULT) or not event.text:
        return None
    if "STATUS" not in event.text.upper():
        return None  # most text events: no block to parse
    block = parse_status(event.text)
    if block.status is None:
        return None
    reason = " ".join((block.reason or "").split())[:200]
    return f"STATUS: {block.status}" + (f" - {reason}" if reason else "")


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


def progress_of(store: Store, run_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The heartbeat rows of these runs, by run id."""
    ensure(store)
    if not run_ids:
        return {}
    marks = ", ".join("?" for _ in run_ids)
    rows = store.db.execute(f"SELECT * FROM run_progress WHERE run_id IN ({marks})", run_ids)
    return {int(row["run_id"]): dict(row) for row in rows}


def events_after(store: Store, after_id: int, limit: int = 500) -> list[dict[str, Any]]:
    """The journal's lines after line `after_id`, oldest first (`worker log -f`)."""
    ensure(store)
    rows = store.db.execute(
        "SELECT id, run_id, at, text FROM run_events WHERE id > ? ORDER BY id LIMIT ?",
        (after_id, limit),
    )
    return [dict(row) for row in rows]


def last_event_id(store: Store) -> int:
    ensure(store)
    row = store.db.execute("SELECT COALESCE(MAX(id), 0) FROM run_events").fetchone()
    return int(row[0])


def tools_of(store: Store, run_id: int) -> dict[int, dict[str, Any]]:
    """Per iteration (its seq): the tools used with their counts, and the files written."""
    ensure(store)
    rows = store.db.execute("SELECT * FROM iteration_tools WHERE run_id = ?", (run_id,))
    return {
        int(row["seq"]): {"tools": json.loads(row["tools"]), "files": json.loads(row["files"])}
        for row in rows
    }


@dataclass
class ReviewStep:
    """The reviewers' step after a task: its own time and cost, never the task's."""

    duration_s: float = 0.0
    cost_usd: float = 0.0
    ran: int = 0


@contextmanager
def review_step(store: Store, display: Display | None) -> Iterator[ReviewStep]:
    """Time the reviewers and read what they cost from their own records."""
    step = ReviewStep()
    before = _review_totals(store)
    if display is not None:
        display.phase("reviewers")
    started = time.monotonic()
    try:
        yield step
    finally:
        step.duration_s = time.monotonic() - started
        after = _review_totals(store)
        step.ran, step.cost_usd = after[0] - before[0], after[1] - before[1]
        if display is not None:
            text = (
                f"reviewers: {step.ran} ran in {step.duration_s:.1f}s, ${step.cost_usd:.4f}"
                if step.ran
                else None
            )
            display.phase_end(text)


def _review_totals(store: Store) -> tuple[int, float]:
    try:
        row = store.db.execute("SELECT COUNT(*), COALESCE(SUM(cost_usd), 0) FROM review_runs")
        count, cost = row.fetchone()
    except sqlite3.OperationalError:
        return 0, 0.0  # no reviewer has ever run here
    return int(count), float(cost)
