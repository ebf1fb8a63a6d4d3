"""Helpers for the dashboard's tests: a dashboard on a free loopback port, a logged-in HTTP
client, and a run with iterations, tools and a transcript recorded as worker records them."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from worker.config import Settings, load_settings
from worker.state.progress import ensure as ensure_progress
from worker.state.store import Store
from worker.web.server import Served, running

TOKEN = "dashboard-token-0123456789abcdef"


@contextmanager
def dashboard(
    ws: Path, token: str | None = TOKEN, name: str = "alice", private: bool | None = False
) -> Iterator[Served]:
    """The dashboard of `ws`; reading open on loopback unless `private` (None: as `worker
    dashboard` decides, from what the box lets an agent reach: tests/test_escape_dashboard.py)."""
    with running(load_settings(ws), token=token, name=name, private=private) as served:
        yield served


_OPEN: list[httpx.Client] = []


def client(served: Served) -> httpx.Client:
    """An HTTP client of the dashboard, closed by `close_clients` after the test."""
    _OPEN.append(httpx.Client(base_url=served.url, follow_redirects=False, timeout=60))
    return _OPEN[-1]


def close_clients() -> None:
    while _OPEN:
        _OPEN.pop().close()


def logged_in(served: Served, token: str = TOKEN) -> tuple[httpx.Client, str]:
    """A client with a session, and the session's CSRF token read from the page."""
    http = client(served)
    answer = http.post("/login", data={"token": token})
    assert answer.status_code == 303, answer.text
    page = http.get("/").text
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "no CSRF field on the page of a logged-in session"
    return http, found.group(1)


def record_run(
    settings: Settings,
    task_id: str,
    *,
    outcome: str = "success",
    reason: str = "done",
    cost: float = 0.25,
    started_at: float | None = None,
    transcript: list[dict[str, Any]] | None = None,
) -> int:
    """A finished run of one iteration, as the loop records it (runs, iterations, tools,
    the iteration's stream-json log)."""
    with Store(settings.db_path) as store:
        ensure_progress(store)
        run_id = store.start_run(settings.machine_id, 1)
        at = started_at or time.time()
        store.db.execute("UPDATE runs SET started_at = ? WHERE id = ?", (at, run_id))
        store.add_iteration(
            run_id, 1, mode="code-simple", model="haiku", iteration=1, status="COMPLETE",
            reason=reason, reason_code=None, duration_s=12.5, cost_usd=cost,
            input_tokens=1000, output_tokens=200, exit_code=0,
        )  # fmt: skip
        store.db.execute(
            "INSERT INTO iteration_tools(run_id, seq, tools, files) VALUES (?, 1, ?, ?)",
            (run_id, json.dumps({"Write": 1}), json.dumps(["src/app.py"])),
        )
        store.finish_run(
            run_id, task_id=task_id, source="inbox", outcome=outcome, reason=reason,
            modes=["code-simple"], iterations=1, cost_usd=cost, duration_s=12.5,
            reason_codes=["TASK_DONE"],
        )  # fmt: skip
    if transcript is not None:
        folder = settings.logs / f"run-{run_id}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps(line) + "\n" for line in transcript)
        (folder / "iteration-1.jsonl").write_text(lines, encoding="utf-8")
    return run_id


def claude_lines(text: str, command: str) -> list[dict[str, Any]]:
    """A short stream-json transcript: the session, one Bash call, its result, the text."""
    return [
        {"type": "system", "subtype": "init", "session_id": "s-1", "model": "haiku"},
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": command}}
                ]
            },
        },
        {
            "type": "user",
            "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
        },
        {"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}},
    ]
