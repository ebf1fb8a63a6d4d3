"""`worker dashboard` against the fleet's PostgreSQL (a real server): the page of one machine
shows every machine and every machine's runs, an approval for a wait on another machine names
that machine and writes nothing, and the database's password is never rendered."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import FakeAgent, write_message
from tests.pg import PASSWORD
from tests.web_support import TOKEN, client, close_clients, dashboard
from worker.config import load_settings
from worker.models import Outcome
from worker.run.runner import RunOptions, run_once


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_clients()


def _machine(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    ws = tmp_path / name
    (ws / "inbox").mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("WORKER_INBOX", str(ws / "inbox"))
    monkeypatch.setenv("WORKER_MACHINE_ID", name)
    return ws


def test_the_page_against_the_fleet_database_shows_every_machine(
    tmp_path: Path, pg_url: str, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKER_FLEET__DATABASE_URL", pg_url)
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    monkeypatch.setenv("WORKER_ALLOW_INBOX_IN_WORKSPACE", "true")
    fake_claude.answers(
        {"status": "wait", "wait_for": "Bob's go-ahead", "resume_when": "user_approval"},
        {"status": "success", "reason": "done"},
    )
    one = _machine(tmp_path, "m-one", monkeypatch)
    write_message(one, "msg-on-one", to="m-one")
    assert run_once(load_settings(one), RunOptions()).outcome is Outcome.WAITING
    two = _machine(tmp_path, "m-two", monkeypatch)
    write_message(two, "msg-on-two", to="m-two")
    assert run_once(load_settings(two), RunOptions()).outcome is Outcome.SUCCESS
    with dashboard(two) as served:
        http = client(served)
        now = http.get("/").text
        history = http.get("/history").text
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        approve = http.post("/actions/approve", data={"task": "msg-on-one"}, headers=bearer)
        cancel = http.post("/actions/cancel", data={"task": "msg-nowhere"}, headers=bearer)
        order = http.post("/actions/cancel", data={"task": "msg-on-one"}, headers=bearer)
    machines = now.split('id="machines"')[1].split("</table>")[0]
    assert "m-one" in machines and "m-two" in machines
    assert "msg-on-one" in history and "msg-on-two" in history
    assert approve.status_code == 404
    assert "msg-on-one waits on machine m-one, not on this one (m-two)" in approve.json()["error"]
    assert cancel.status_code == 404
    assert PASSWORD not in now + history + approve.text
    assert order.status_code == 200, order.text
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT action, task_id, sender FROM fleet_orders").fetchall()
    assert rows == [("cancel", "msg-on-one", "web:alice")]
