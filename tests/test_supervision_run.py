"""The supervisor inside `worker run`: a fake `claude` printing real stream-json, the real loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import state_of
from worker.config import load_settings
from worker.run.runner import RunOptions, run_once

from .conftest import FakeAgent, write_message

LOOPING = {
    "tools": [{"name": "Bash", "input": {"command": "cat status.txt"}}] * 12,
    "status": "success",
    "reason": "done at last",
}


def run(ws: Path):  # type: ignore[no-untyped-def]
    return run_once(load_settings(ws), RunOptions())


def test_passthrough_off_lets_the_loop_run_and_writes_nothing(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Supervision off: the twelve identical calls run to the end, the task succeeds as it
    would without a supervisor, no report is written and no prompt carries steering."""
    monkeypatch.setenv("WORKER_SUPERVISION__ENABLED", "false")
    fake_claude.answers(LOOPING)
    write_message(workspace, "msg-1")
    report = run(workspace)
    assert report.outcome.value == "success"
    assert not (state_of(workspace) / "reports").exists()
    assert not any("[SUPERVISOR]" in call["stdin"] for call in fake_claude.calls)


def test_a_tight_loop_is_cut_short_and_reported(workspace: Path, fake_claude: FakeAgent) -> None:
    """Supervision on: the radio check stops the agent in the middle of its loop; the loop
    ends the task as a supervisor emergency and the machine's report says red and why."""
    fake_claude.answers(LOOPING)
    write_message(workspace, "msg-2")
    report = run(workspace)
    assert report.outcome.value == "failure"
    assert "SUPERVISOR_EMERGENCY" in report.reason_codes
    assert report.reason.startswith("supervisor emergency: Loop: you called Bash")
    status = json.loads((state_of(workspace) / "reports" / "test-machine_latest.json").read_text())
    assert status["health"] == "red" and status["state"] == "finished"
    assert status["stopped"].startswith("supervisor emergency:")
    assert status["task_id"] == "msg-2" and status["outcome"] == "failure"


def test_steering_reaches_the_next_prompt(workspace: Path, fake_claude: FakeAgent) -> None:
    """Three identical failing calls in iteration 1: iteration 2's prompt carries the
    `[SUPERVISOR]` loop message; the report shows the task running, then finished."""
    failing = {"name": "Bash", "input": {"command": "make"}, "error": "Exit code 2\nboom"}
    fake_claude.answers(
        {"tools": [failing] * 3, "status": "continue", "reason": "still broken"},
        {"status": "success", "reason": "fixed"},
    )
    write_message(workspace, "msg-3")
    report = run(workspace)
    assert report.outcome.value == "success"
    first, second = fake_claude.task_calls[:2]
    assert "[SUPERVISOR]" not in first["stdin"]
    assert "## Supervisor notes" in second["stdin"]
    assert '[SUPERVISOR] Loop: you called Bash `{"command":"make"}` 3 times' in second["stdin"]
    status = json.loads((state_of(workspace) / "reports" / "test-machine_latest.json").read_text())
    assert status["outcome"] == "success" and status["iteration"] == 2
