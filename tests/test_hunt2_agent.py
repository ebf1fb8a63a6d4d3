"""Hunted agent bugs (second round), with the real Claude Code CLI against the scripted
Messages API on 127.0.0.1: an account out of credit is the operator's to fix, not the task's."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.fakes.anthropic_api import AnthropicAPI, failure
from tests.realcli_support import real_cli

from .conftest import run_with_real_claude, state_of, write_message

real_cli("claude", module=True)

pytestmark = pytest.mark.slow

# What the Messages API answers an account without credit (HTTP 400, invalid_request_error).
NO_CREDIT = (
    "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing "
    "to upgrade or purchase credits."
)


def test_an_account_out_of_credit_stops_the_run_with_78_and_leaves_the_task(
    workspace: Path, claude_api: AnthropicAPI
) -> None:
    """Every call is refused for want of credit. Before, each session counted as an agent
    error: iterations spent, the task escalated to a stronger mode, and retried every few
    minutes until its escalation chain ran out. Now, as with a bad key, the run ends at once
    with exit 78 naming the credit, no iteration is counted, and the message stays unread."""
    claude_api.always(failure(400, NO_CREDIT))
    message = write_message(workspace, "msg-1")
    done = run_with_real_claude(workspace, claude_api, "run", "--json")
    assert done.returncode == 78, done.stderr
    report = json.loads(done.stdout)
    assert (report["outcome"], report["modes"]) == ("stopped", ["code-simple"])
    assert "credit" in report["reason"].lower()
    assert json.loads(message.read_text())["status"] == "unread"
    db = sqlite3.connect(state_of(workspace) / "worker.db")
    assert db.execute("SELECT COUNT(*) FROM iterations").fetchone()[0] == 0
    assert len(claude_api.conversation_requests()) == 1
