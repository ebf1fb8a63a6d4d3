"""The dashboard tells waits apart and keeps its history readable, on a real server on
127.0.0.1: a person / CI / a review / a moment each under its own heading, a running task not
among the waits; idle runs counted per day instead of listed; each run's own cost; an
approval's result shown (the flash, and the wait marked answered)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import save_approval_wait, write_message
from tests.web_support import close_clients, dashboard, logged_in, record_run
from worker.config import load_settings
from worker.state.progress import ensure as ensure_progress
from worker.state.store import Store
from worker.web.live import snapshot
from worker.web.wait_kinds import group_of, grouped

pytestmark = pytest.mark.usefixtures("only_the_task")


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_clients()


def _wait(ws: Path, task_id: str, **fields: object) -> None:
    write_message(ws, task_id)
    settings = load_settings(ws)
    with Store(settings.db_path) as store:
        save_approval_wait(settings, store, task_id, **fields)


def _section(page: str, key: str) -> str:
    found = re.search(rf'<section class="waits" id="waits-{key}">(.*?)</section>', page, re.S)
    return found.group(1) if found else ""


def test_each_wait_is_under_what_it_waits_for(workspace: Path) -> None:
    _wait(workspace, "msg-ask", waitFor="May I drop the table?")
    later = (datetime.now(UTC) + timedelta(hours=3)).isoformat()
    _wait(workspace, "msg-later", resumeWhen="time", resumeAt=later, waitFor="the usage reset")
    with dashboard(workspace) as served:
        http, _ = logged_in(served)
        page = http.get("/").text
    assert "msg-ask" in _section(page, "person") and "Waiting for a person" in page
    assert "msg-later" in _section(page, "time") and "msg-later" not in _section(page, "person")
    assert "Waiting for a moment" in page and "resumes at" in _section(page, "time")
    assert "Approve" not in _section(page, "time")  # a moment is not approved


def test_a_pull_request_wait_is_ci_while_checks_run_then_a_review() -> None:
    """The pull request's standing at the last look decides (`waits.github_pr`)."""
    base = {"task_id": "acme/app#7", "resume_when": "pull_request"}
    assert group_of({**base, "pull_request": None}) == "ci"  # not looked at yet
    assert group_of({**base, "pull_request": "#1000: checks running: tests"}) == "ci"
    nothing = "#1000: open, nothing to fix; a person merges it, or labels it 'worker:merge'"
    assert group_of({**base, "pull_request": nothing}) == "review"
    assert group_of({**base, "pull_request": "#1000: changes requested"}) == "review"
    assert group_of({"task_id": "t", "resume_when": "github_decision"}) == "person"
    assert group_of({"task_id": "t", "resume_when": "time"}) == "time"


def test_a_running_task_is_not_among_the_waits(workspace: Path) -> None:
    """A task resumed from its wait runs now: it is shown running, not waiting, and the live
    view's count agrees (no "reload" banner for it)."""
    _wait(workspace, "msg-run", waitFor="May I?")
    settings = load_settings(workspace)
    with Store(settings.db_path) as store:
        ensure_progress(store)
        run_id = store.start_run(settings.machine_id, os.getpid())
        store.db.execute(
            "INSERT INTO run_progress(run_id, task_id, title, mode, iteration, max_iterations,"
            " started_at, updated_at, cost_usd, tool) VALUES (?, 'msg-run', 'Build it',"
            " 'code-simple', 2, 5, ?, ?, 0.12, NULL)",
            (run_id, time.time(), time.time()),
        )
    with dashboard(workspace) as served:
        http, _ = logged_in(served)
        page = http.get("/").text
    assert 'data-task="msg-run"' in page.split("<h2>Running")[1].split("</table>")[0]
    assert 'article class="wait" data-task="msg-run"' not in page
    assert "no task is waiting" in page
    assert snapshot(settings)["waiting"] == 0
    running = [{"task_id": "msg-run"}]
    rows = [{"task_id": "msg-run", "resume_when": "user_approval"}]
    assert grouped(rows, running) == []


def test_history_counts_idle_runs_per_day_and_shows_each_runs_own_cost(workspace: Path) -> None:
    settings = load_settings(workspace)
    day = datetime(2026, 11, 20, 12, tzinfo=UTC).timestamp()
    for n in range(5):
        record_run(settings, None, outcome="idle", cost=0.0, started_at=day + n * 300)  # type: ignore[arg-type]
    worked = record_run(settings, "msg-1", cost=0.30, started_at=day + 2000)
    with Store(settings.db_path) as store:  # resumed: the task's total includes earlier runs
        store.db.execute("UPDATE runs SET cost_usd = 0.9 WHERE id = ?", (worked,))
    with dashboard(workspace) as served:
        http, _ = logged_in(served)
        page = http.get("/history").text
    table = page.split('id="history"')[1].split("</table>")[0]
    assert table.count("<tr class=") == 1 and "msg-1" in table  # the idle runs are not rows
    assert "$0.3000" in table and "(task $0.9000)" in table
    idle = page.split('id="idle"')[1].split("</table>")[0]
    assert "<td>2026-11-20</td><td>5</td>" in idle


def test_an_approval_shows_its_result(workspace: Path) -> None:
    _wait(workspace, "msg-w", waitFor="May I drop the table?")
    with dashboard(workspace) as served:
        http, csrf = logged_in(served)
        answer = http.post("/actions/approve", data={"task": "msg-w", "note": "yes", "csrf": csrf})
        assert answer.status_code == 303
        page = http.get("/").text
        again = http.get("/").text
    assert 'id="flash"' in page and "approval of msg-w noted" in page
    article = page.split('data-task="msg-w"')[1].split("</article>")[0]
    assert "answered: the next run resumes it" in article
    assert "Approve" not in article  # not asked again
    assert 'id="flash"' not in again  # said once
