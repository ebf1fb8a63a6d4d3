"""Conformance with the real Claude Code CLI (the version pinned in tests/realcli/package.json),
driven offline: `worker run` starts the real `claude`, which talks to the scripted Messages API
of tests/fakes/anthropic_api.py on 127.0.0.1. These tests are what tells us when the CLI
changes its stream format, its retries or its errors.

Skipped, with the reason printed, only when the CLI is not installed
(`npm ci --prefix tests/realcli`); in CI (`CI` or `REALCLI_REQUIRED` set, as `.ci/run` does) a
missing CLI is an error instead.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import status_block
from tests.fakes.anthropic_api import AnthropicAPI, failure, hang, text, tool_use
from tests.realcli_support import real_cli
from worker.status import STATUS_INSTRUCTIONS, STATUS_REMINDER

from .conftest import run_with_real_claude, state_of, write_message

real_cli("claude", module=True)

pytestmark = pytest.mark.slow


def report_of(done: Any) -> dict[str, Any]:
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout)


def iterations(ws: Path) -> int:
    db = sqlite3.connect(state_of(ws) / "worker.db")
    return int(db.execute("SELECT COUNT(*) FROM iterations").fetchone()[0])


def user_texts(body: dict[str, Any]) -> list[str]:
    """Every text the request carries in its messages (user and assistant turns)."""
    out: list[str] = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            out.append(content)
            continue
        for block in content:
            if block.get("type") == "text":
                out.append(block["text"])
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                out.append(inner if isinstance(inner, str) else json.dumps(inner))
    return out


def processes_talking_to(api: AnthropicAPI) -> list[int]:
    """Live processes whose environment points at this API (a `claude` left behind)."""
    found = []
    for process in psutil.process_iter():  # psutil: Linux, macOS and Windows alike
        try:
            if process.environ().get("ANTHROPIC_BASE_URL") == api.url:
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


def test_the_process_check_sees_a_process_pointed_at_the_api(claude_api: AnthropicAPI) -> None:
    """The "no process left" checks below can fail: a live one is found."""
    env = {**os.environ, "ANTHROPIC_BASE_URL": claude_api.url}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        assert processes_talking_to(claude_api) == [child.pid]
    finally:
        child.kill()
        child.wait()


def test_a_real_edit_then_success(workspace: Path, claude_api: AnthropicAPI) -> None:
    """The CLI's own Write tool changes a file in the workspace; the STATUS block ends it."""
    target = workspace / "hello.txt"
    claude_api.script(
        tool_use("Write", {"file_path": str(target), "content": "hello from the agent\n"}),
        text("Wrote the file.\n" + status_block("success", "hello.txt written")),
    )
    write_message(workspace, "msg-1", subject="Write hello.txt")
    done = run_with_real_claude(workspace, claude_api, "run", "--json")
    assert done.returncode == 0, done.stderr
    report = report_of(done)
    assert (report["outcome"], report["iterations"], report["reason"]) == (
        "success",
        1,
        "hello.txt written",
    )
    assert target.read_text() == "hello from the agent\n"
    calls = claude_api.conversation_requests()
    assert len(calls) == 2 and "Write hello.txt" in "\n".join(user_texts(calls[0]))
    assert any("File created successfully" in t for t in user_texts(calls[1]))


def test_the_second_iteration_resumes_the_first_conversation(
    workspace: Path, claude_api: AnthropicAPI
) -> None:
    """`--resume`: the second iteration's request carries the first one's exchange."""
    claude_api.script(
        text("Looked around: the parser is in src/.\n" + status_block("continue", "found it")),
        text("Fixed.\n" + status_block("success", "fixed")),
    )
    write_message(workspace, "msg-1", subject="Fix the parser")
    report = report_of(run_with_real_claude(workspace, claude_api, "run", "--json"))
    assert (report["outcome"], report["iterations"]) == ("success", 2)
    first, second = claude_api.conversation_requests()
    assert len(second["messages"]) > len(first["messages"])
    carried = "\n".join(user_texts(second))
    assert "Looked around: the parser is in src/." in carried and "Fix the parser" in carried


def test_wait_approve_resume_with_the_note_in_the_prompt(
    workspace: Path, claude_api: AnthropicAPI
) -> None:
    claude_api.script(
        text(
            "I need to delete the old table.\n"
            + status_block("wait", "destructive", wait_for="approval", resume_when="user_approval")
        ),
        text("Deleted.\n" + status_block("success", "table deleted")),
    )
    write_message(workspace, "msg-1", subject="Clean the database")
    first = report_of(run_with_real_claude(workspace, claude_api, "run", "--json"))
    assert first["outcome"] == "waiting"
    approved = run_with_real_claude(
        workspace, claude_api, "waits", "approve", "msg-1", "--note", "yes, drop table old_users"
    )
    assert approved.returncode == 0, approved.stderr
    resumed = report_of(run_with_real_claude(workspace, claude_api, "run", "--json"))
    assert resumed["outcome"] == "success" and "WAIT_STATE_RESUMED" in resumed["reason_codes"]
    last = claude_api.conversation_requests()[-1]
    carried = "\n".join(user_texts(last))
    assert "yes, drop table old_users" in carried
    assert "I need to delete the old table." in carried  # the same session, resumed


def test_a_hung_api_is_timed_out_and_no_process_is_left(
    workspace: Path, claude_api: AnthropicAPI
) -> None:
    """The API never answers: the task's wall clock ends the CLI's process group."""
    claude_api.always(hang())
    write_message(workspace, "msg-1")
    done = run_with_real_claude(
        workspace,
        claude_api,
        "run",
        "--json",
        env={"WORKER_ITERATION_TIMEOUT_S": "6", "WORKER_TASK_WALL_CLOCK_S": "8"},
    )
    report = report_of(done)
    assert report["outcome"] == "failure" and "WALL_CLOCK_CAP" in report["reason_codes"]
    assert "AGENT_TIMEOUT" in report["reason_codes"]
    assert claude_api.conversation_requests(), "the CLI never called the API"
    assert processes_talking_to(claude_api) == []


def test_a_bad_key_ends_the_run_with_78_and_leaves_the_task(
    workspace: Path, claude_api: AnthropicAPI
) -> None:
    """401 on every call: the CLI is ended at its first retry, the message stays unread in the
    inbox, nothing is counted, and the reason says authentication and what to fix."""
    claude_api.always(failure(401))
    message = write_message(workspace, "msg-1")
    done = run_with_real_claude(workspace, claude_api, "run", "--json")
    assert done.returncode == 78, done.stderr
    report = report_of(done)
    assert report["outcome"] == "stopped" and report["infra"] == "auth"
    assert report["reason"].startswith("Claude Code could not authenticate")
    assert "ANTHROPIC_API_KEY" in report["reason"]
    assert json.loads(message.read_text())["status"] == "unread"
    assert not (workspace / "inbox" / "outbox" / "msg-1-failure-reply.json").exists()
    assert iterations(workspace) == 0
    assert len(claude_api.conversation_requests()) <= 3  # not the CLI's 10 retries
    assert processes_talking_to(claude_api) == []
    for command in ("log", "why"):
        shown = run_with_real_claude(workspace, claude_api, command)
        assert "Claude Code could not authenticate" in shown.stdout, command


def test_an_overloaded_api_leaves_the_task_waiting(
    workspace: Path, claude_api: AnthropicAPI
) -> None:
    """529 on every call: the CLI is ended at its 3rd retry; the task waits (timed), no
    iteration is counted, nothing escalates."""
    claude_api.always(failure(529))
    write_message(workspace, "msg-1")
    done = run_with_real_claude(workspace, claude_api, "run", "--json")
    assert done.returncode == 0, done.stderr
    report = report_of(done)
    assert report["outcome"] == "waiting" and report["iterations"] == 0
    assert report["reason_codes"][-1] == "AGENT_API_UNAVAILABLE"
    assert report["modes"] == ["code-simple"]
    state = json.loads(Path(report["wait_state"]).read_text())
    assert state["resumeWhen"] == "time"
    assert datetime.fromisoformat(state["resumeAt"]) > datetime.now(UTC)
    assert iterations(workspace) == 0
    assert processes_talking_to(claude_api) == []


def test_a_missing_binary_exits_78_and_touches_no_task(
    workspace: Path, claude_api: AnthropicAPI
) -> None:
    message = write_message(workspace, "msg-1")
    before = message.read_bytes()
    done = run_with_real_claude(
        workspace, claude_api, "run", env={"WORKER_CLAUDE_BIN": str(workspace / "no-claude")}
    )
    assert done.returncode == 78
    assert "Claude Code cannot start" in done.stderr and "claude_bin" in done.stderr
    assert message.read_bytes() == before
    assert claude_api.requests == []


def newest_prompt(body: dict[str, Any]) -> str:
    """worker's prompt in this request: the newest user text that starts like one."""
    return [t for t in user_texts(body) if t.lstrip().startswith("# Task msg-1")][-1]


def test_a_resumed_session_ends_with_a_parseable_block_without_the_instructions_again(
    workspace: Path, claude_api: AnthropicAPI
) -> None:
    """Issue 32: the STATUS instructions go once, in the session's first prompt; the resumed
    iterations carry only what is new, and their blocks are read all the same. An answer
    without a block brings a one-line reminder, once."""
    claude_api.script(
        text("Looked around: the parser is in src/."),  # no block
        text("Half done.\n" + status_block("continue", "tests next")),
        text("Fixed.\n" + status_block("success", "parser fixed")),
    )
    write_message(workspace, "msg-1", subject="Fix the parser")
    report = report_of(run_with_real_claude(workspace, claude_api, "run", "--json"))
    assert (report["outcome"], report["iterations"], report["reason"]) == (
        "success",
        3,
        "parser fixed",
    )
    assert "NO_STATUS_BLOCK" in report["reason_codes"]
    first, second, third = claude_api.conversation_requests()
    assert STATUS_INSTRUCTIONS in newest_prompt(first)
    for later in (second, third):
        # The session holds the instructions once; the new prompt does not repeat them.
        assert "\n".join(user_texts(later)).count(STATUS_INSTRUCTIONS) == 1
        assert STATUS_INSTRUCTIONS not in newest_prompt(later)
        assert "Please do the thing." not in newest_prompt(later)
    assert STATUS_REMINDER in newest_prompt(second)
    assert STATUS_REMINDER not in newest_prompt(third)


def test_a_new_mode_after_escalation_gets_the_instructions_again(
    workspace: Path, claude_api: AnthropicAPI
) -> None:
    """Escalated from code-simple to code-complex (the same CLI, a stronger model): the first
    prompt in the new mode is a briefing, the task and the STATUS instructions in it."""
    claude_api.script(
        text("Too hard for me.\n" + status_block("escalate", "needs a stronger model")),
        text("Done.\n" + status_block("success", "fixed in the stronger mode")),
    )
    write_message(workspace, "msg-1", subject="Fix the parser")
    report = report_of(run_with_real_claude(workspace, claude_api, "run", "--json"))
    assert (report["outcome"], report["modes"]) == ("success", ["code-simple", "code-complex"])
    assert report["reason"] == "fixed in the stronger mode"
    _, escalated = claude_api.conversation_requests()
    prompt = newest_prompt(escalated)
    assert "Mode code-complex, iteration 1 of" in prompt
    assert STATUS_INSTRUCTIONS in prompt and "Please do the thing." in prompt
