"""The live view: one poller for every open page.

However many pages are open, the store is read once per interval, through a read-only SQLite
connection (no lock a running task could wait on), and only when at least one page listens;
each page gets the snapshot when it changes. Twenty open pages cost the running task what one
does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from worker.config import Settings
from worker.process.platform.process import alive
from worker.waits.state import file_name, wait_state_files

log = logging.getLogger(__name__)

POLL_S = 1.0
KEEPALIVE_S = 15.0  # a comment line now and then: proxies close silent streams


def read_running(settings: Settings, now: float | None = None) -> list[dict[str, Any]]:
    """The runs not ended yet with their heartbeat, read-only (as `worker status` shows them)."""
    if not settings.db_path.exists():
        return []
    now = now or time.time()
    try:
        db = sqlite3.connect(f"file:{settings.db_path}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return []
    try:
        db.row_factory = sqlite3.Row
        runs = db.execute(
            "SELECT r.id, r.machine_id, r.pid, COALESCE(p.task_id, r.task_id) AS task_id,"
            " r.started_at, p.title, p.mode,"
            " p.model, p.iteration, p.max_iterations, p.cost_usd, p.tool, p.finding,"
            " p.updated_at FROM runs r LEFT JOIN run_progress p ON p.run_id = r.id"
            " WHERE r.ended_at IS NULL ORDER BY r.id"
        ).fetchall()
    except sqlite3.Error:  # no run_progress table yet, or the file is being replaced
        return []
    finally:
        db.close()
    return [_running_row(dict(r), now) for r in runs if _live(dict(r), settings)]


def _live(run: dict[str, Any], settings: Settings) -> bool:
    return run["machine_id"] != settings.machine_id or alive(run["pid"])


def _running_row(run: dict[str, Any], now: float) -> dict[str, Any]:
    return {
        "run": run["id"],
        "machine": run["machine_id"],
        "task_id": run["task_id"],
        "title": run["title"] or "",
        "mode": run["mode"],
        "model": run["model"],
        "iteration": run["iteration"] or 0,
        "max_iterations": run["max_iterations"] or 0,
        "started_at": run["started_at"],
        "elapsed_s": round(now - run["started_at"]),
        "cost_usd": run["cost_usd"] or 0.0,
        "tool": run["tool"],
        "finding": run["finding"],
        "heartbeat_age_s": round(now - run["updated_at"]) if run["updated_at"] else None,
    }


def snapshot(settings: Settings) -> dict[str, Any]:
    """What the live view shows: the running tasks and how many tasks wait (a task that runs
    now is not waiting, as the page shows it: `worker.web.wait_kinds`)."""
    running = read_running(settings)
    busy = {file_name(run["task_id"]) for run in running if run.get("task_id")}
    waiting = [path for path in wait_state_files(settings.wait_states) if path.name not in busy]
    return {"running": running, "waiting": len(waiting)}


class Broadcaster:
    """Polls `read` while anyone listens and hands each change to every listener."""

    def __init__(self, read: Callable[[], dict[str, Any]], scrub: Callable[[Any], Any]) -> None:
        self._read = read
        self.scrub = scrub
        self._listeners: set[asyncio.Queue[str]] = set()
        self._task: asyncio.Task[None] | None = None
        self._last: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False
        self.reads = 0  # how often the store was read

    def close(self) -> None:
        """End every stream now (the server is stopping); callable from any thread."""
        self.closed = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        for queue in list(self._listeners):
            _put_latest(queue, "")  # the empty text ends a stream

    @property
    def listeners(self) -> int:
        return len(self._listeners)

    async def _poll(self) -> None:
        while self._listeners:
            try:
                data = await asyncio.to_thread(self._read)
                self.reads += 1
                text = json.dumps(self.scrub(data), default=str)
            except Exception:  # a failed read is logged; the next one may succeed
                log.debug("dashboard: live read failed", exc_info=True)
                text = None
            if text is not None and text != self._last:
                self._last = text
                for queue in list(self._listeners):
                    _put_latest(queue, text)
            await asyncio.sleep(POLL_S)
        self._task = None

    async def stream(self) -> AsyncIterator[str]:
        """Server-sent events for one page: the latest snapshot, then each change."""
        queue: asyncio.Queue[str] = asyncio.Queue(maxsize=1)
        if self.closed:
            return
        self._loop = asyncio.get_running_loop()
        self._listeners.add(queue)
        if self._last is not None:
            _put_latest(queue, self._last)
        if self._task is None:
            self._task = asyncio.create_task(self._poll())
        try:
            while True:
                try:
                    text = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    yield ": keepalive\n\n"
                    continue
                if not text:
                    return
                yield f"event: now\ndata: {text}\n\n"
        finally:
            self._listeners.discard(queue)
            if not self._listeners:
                self._last = None  # the next first page reads afresh


def _put_latest(queue: asyncio.Queue[str], text: str) -> None:
    """A slow page gets the newest snapshot, never a backlog."""
    with contextlib.suppress(asyncio.QueueEmpty):
        while queue.full():
            queue.get_nowait()
    queue.put_nowait(text)
