"""`worker status` while a task runs: the task, its iteration, elapsed time, cost and current
tool (from the run's heartbeat), its claim and lease, the queue per source, the last failures;
and `worker supervise` telling the child's starts and exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from worker.cli.app import app
from worker.config import load_settings
from worker.daemon.state import SupervisorState
from worker.daemon.supervise_watch import EventWatch, describe
from worker.state.store import Store

from .conftest import FakeAgent, run_worker, write_message

pytestmark = pytest.mark.usefixtures("only_the_task")


def _status(ws: Path) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["status", "--json", "-w", str(ws)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.slow
def test_status_during_a_run_shows_the_task_its_tool_its_claim_and_the_queue(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    fake_claude.answers(
        {
            "tools": [{"name": "Bash", "input": {"command": "pytest -q tests/test_slow.py"}}],
            "text": "thinking",
            "hang_after_text": 60,
        }
    )
    write_message(workspace, "msg-busy", subject="The busy one", created_at="2026-11-20T10:00:00Z")
    write_message(workspace, "msg-next", subject="Next", created_at="2026-11-21T10:00:00Z")
    env = {**os.environ, **fake_claude.env()}
    with subprocess.Popen(
        [sys.executable, "-m", "worker", "run", "--quiet", "--workspace", str(workspace)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as running:
        try:
            data = _until(workspace, lambda d: bool(d["running"]) and d["running"][0]["tool"])
        finally:
            running.send_signal(signal.SIGTERM)
            running.wait(timeout=60)
    [run] = data["running"]
    assert (run["task_id"], run["title"]) == ("msg-busy", "The busy one")
    assert (run["mode"], run["iteration"], run["max_iterations"]) == ("code-simple", 1, 5)
    assert run["tool"] == "Bash: pytest -q tests/test_slow.py"
    assert run["elapsed_s"] >= 0 and run["cost_usd"] == 0.0
    [claim] = data["claims"]
    assert claim["task_id"] == "msg-busy" and claim["lease_left_s"] > 0
    assert data["queue"]["inbox"] == 1  # msg-next waits its turn
    text = CliRunner().invoke(app, ["status", "-w", str(workspace)]).stdout
    assert "running: nothing" in text  # the run has ended since
    after = _status(workspace)
    assert after["running"] == [] and after["last_run"]["id"] == run["run"]


def _until(ws: Path, shows: Any) -> dict[str, Any]:
    """`worker status --json` until it shows what is expected (the deadline only keeps a
    broken heartbeat from hanging the suite)."""
    deadline = time.monotonic() + 60
    data: dict[str, Any] = {}
    while time.monotonic() < deadline:
        data = _status(ws)
        if shows(data):
            return data
        time.sleep(0.2)
    raise AssertionError(f"status never showed it: {data}")


def test_status_lists_the_last_failures_with_their_codes(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    fake_claude.answers({"status": "failure", "reason": "the schema is locked"})
    write_message(workspace, "msg-lost", subject="Migrate the schema")
    assert run_worker(workspace, "run", "--mode", "sync-complex").returncode == 1
    data = _status(workspace)
    [failure] = data["failures"]
    assert (failure["task"], failure["title"]) == ("msg-lost", "Migrate the schema")
    assert failure["codes"] == ["FAILURE_AT_TOP_MODE"]
    assert failure["reason"] == "the schema is locked"
    text = run_worker(workspace, "status").stdout
    assert "last failures:" in text and "FAILURE_AT_TOP_MODE" in text
    assert "spent today: $0.0100" in text  # the fake agent's one call


def test_supervise_tells_child_starts_and_exits_and_a_crash_loop_is_notified(
    workspace: Path,
) -> None:
    """The supervisor's events, as `worker supervise` prints them; a crash-loop give-up is
    queued as a notification (a webhook is configured, not reachable: it stays queued)."""
    (workspace / "worker.toml").write_text(
        '[notify.webhook]\nurl = "http://127.0.0.1:9/"\n', encoding="utf-8"
    )
    settings = load_settings(workspace)
    said: list[str] = []
    with Store(settings.db_path) as store:
        state = SupervisorState(store)
        with EventWatch(settings, said.append, poll_s=3600):
            state.event("start", revision="abc123def4567890", pid=41)
            state.event("exit", pid=41, exit_code=1)
            state.event("restart_scheduled", delay_s=2.0, reason="exit code 1")
            state.event("give_up", reason="crash loop: 5 crashes in 300 s")
        rows = store.db.execute("SELECT event, channel, sent_at FROM notify_outbox").fetchall()
    assert said == [
        "child started: worker serve, pid 41, revision abc123def456",
        "child exited with code 1 (pid 41)",
        "restart in 2.0 s: exit code 1",
        "gave up: crash loop: 5 crashes in 300 s",
    ]
    assert [(r["event"], r["channel"], r["sent_at"]) for r in rows] == [
        ("crash_loop", "webhook", None)
    ]
    assert describe({"kind": "something_new", "reason": "x"}) == "something_new x"
