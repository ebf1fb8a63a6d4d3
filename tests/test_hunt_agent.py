"""Hunted agent-output bugs: what a run does with an agent CLI that says nothing useful."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.config import load_settings
from worker.run.runner import run_once
from worker.state.store import Store

from .conftest import FakeAgent, write_message

pytestmark = pytest.mark.usefixtures("only_the_task")


def test_a_cli_that_exits_0_with_no_output_costs_three_calls_and_says_so(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """A `claude` that prints nothing and exits 0 (a broken wrapper, a stubbed binary) is a
    broken agent like one exiting 1: three identical errors end the task, not 5 + 10
    iterations, and the reason says the CLI ended without a result."""
    empty = workspace.parent / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    fake_claude.answers({"replay": str(empty), "exit": 0})
    write_message(workspace, "silent")
    settings = load_settings(workspace)
    report = run_once(settings)
    assert report.outcome.value == "failure"
    assert report.reason_codes[-1] == "AGENT_REPEATED_ERROR"
    assert len(fake_claude.task_calls) == 3 and report.modes == ["code-simple"]
    with Store(settings.db_path) as store:
        (first, *_) = store.iterations_of(report.run_id)
    assert first["reason"] == (
        "agent_error: Claude Code exited with code 0 without a result: no output"
    )
