"""End to end: a stop order arriving while a task runs, through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FakeAgent, needs_posix, run_worker, state_of, write_message
from worker.process.platform.process import alive as _alive
from worker.process.platform.process import group_running as _group_alive

pytestmark = pytest.mark.slow


def _wait_for(predicate, what: str, limit: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    """Poll until `predicate()`; the limit only guards against a hung test."""
    end = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@needs_posix("checks the agent's process group")
def test_cancel_stops_a_running_task_promptly(workspace: Path, fake_claude: FakeAgent) -> None:
    """`worker cancel TASK` while the agent hangs: the run ends cancelled long before the agent
    would have answered, the agent's process group is gone, the inbox sender is told."""
    # The agent would answer in an hour: a run that ends at all was stopped, not waited for.
    fake_claude.answers({"hang": 3600, "child": True, "status": "success"})
    write_message(workspace, "msg-long")
    run = subprocess.Popen(
        [sys.executable, "-m", "worker", "run", "--json", "--workspace", str(workspace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: bool(fake_claude.calls), "the agent to start")
        agent_pid = fake_claude.calls[0]["pid"]
        cancelled = run_worker(workspace, "cancel", "msg-long", "--reason", "wrong repo")
        assert cancelled.returncode == 0, cancelled.stderr
        assert "cancel order" in cancelled.stdout
        out, err = run.communicate(timeout=300)  # guards a hung test only
    finally:
        if run.poll() is None:
            run.kill()
    report = json.loads(out)
    assert report["outcome"] == "cancelled", err
    assert "wrong repo" in report["reason"]
    assert {"SAFETY_OVERRIDE", "CANCELLED_ON_STOP"} <= set(report["reason_codes"])
    assert not _alive(agent_pid)
    _wait_for(lambda: not _group_alive(agent_pid), "the agent's child to be reaped", 10)
    inbox = workspace / "inbox"
    assert (inbox / "done" / "msg-long.json").exists()  # not back in the queue
    reply = json.loads((inbox / "outbox" / "msg-long-cancelled-reply.json").read_text())
    assert reply["to"] == "alice" and "[cancelled]" in reply["subject"]
    state = state_of(workspace)
    assert not list((state / "control").glob("*.json"))  # the order was consumed
    assert len(list((state / "control" / "done").glob("*.json"))) == 1
    why = run_worker(workspace, "why")
    assert why.returncode == 0, why.stderr
    assert "took msg-long from inbox" in why.stdout
    assert "The run ended cancelled" in why.stdout
