"""End to end through `run_once` (and the real CLI) with the fake `claude`: a task waits, the
condition is met, the next run resumes it with the answer, in the same mode, iteration and
session; usage limits, lost sessions, killed runs, corrupt files and spec-format files."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FakeAgent, rewrite_wait, state_of, write_message
from worker.cli.app import app
from worker.config import load_settings
from worker.process.platform.process import end_group
from worker.run.runner import RunOptions, RunReport, run_once
from worker.waits.service import adopt


@pytest.fixture(autouse=True)
def _no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    monkeypatch.setenv("WORKER_WAITS__USAGE_LIMIT_MARGIN_S", "0")


def run(ws: Path) -> RunReport:
    return run_once(load_settings(ws), RunOptions())


def cli(ws: Path, *args: str) -> Any:
    from typer.testing import CliRunner

    return CliRunner().invoke(app, [*args, "--workspace", str(ws)])


def wait_file(ws: Path, name: str) -> dict[str, Any]:
    return json.loads((ws / "wait_states" / name).read_text())


def test_approval_through_the_cli_resumes_the_same_session_mode_and_iteration(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    write_message(workspace, "msg-1", subject="Delete the old branch")
    fake_claude.answers(
        {"status": "continue", "reason": "looked around"},
        {
            "status": "wait",
            "reason": "destructive",
            "wait_for": "approval to delete",
            "resume_when": "user_approval",
        },
        {"status": "success", "reason": "deleted"},
    )
    first = run(workspace)
    assert first.outcome.value == "waiting" and first.iterations == 2
    state = wait_file(workspace, "msg-1.json")
    assert state["resumeWhen"] == "user_approval" and state["context"]["iteration"] == 2
    assert run(workspace).outcome.value == "idle"  # not approved yet: nothing to do
    result = cli(workspace, "waits", "approve", "msg-1", "--note", "yes, delete it", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["kind"] == "approval"
    resumed = run(workspace)
    assert resumed.outcome.value == "success" and resumed.reason_codes[0] == "WAIT_STATE_RESUMED"
    assert resumed.mode_reason == "MODE_RESTORED"
    call = fake_claude.task_calls[-1]
    assert call["argv"][call["argv"].index("--resume") + 1] == state["sessionId"]
    assert "Approved by the local user" in call["stdin"] and "yes, delete it" in call["stdin"]
    assert "iteration 2 of" in call["stdin"]
    assert not (workspace / "wait_states" / "msg-1.json").exists()
    # The sender heard about the end; the approval is consumed by the next run.
    assert (workspace / "inbox" / "outbox" / "msg-1-success-reply.json").exists()
    run(workspace)
    notes = state_of(workspace) / "intercom" / "msg-1"
    assert not list(notes.glob("*.json")) and list((notes / "done").glob("*.json"))


def test_usage_limit_becomes_a_timed_wait_and_resumes_after_the_reset(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    write_message(workspace, "msg-u")
    reset = int(time.time()) + 3600
    fake_claude.answers({"rate_limit_rejected": reset}, {"status": "success"})
    first = run(workspace)
    assert first.outcome.value == "waiting" and "USAGE_LIMIT" in first.reason_codes
    assert first.iterations == 0  # a usage limit is not an iteration, nor a failure
    state = wait_file(workspace, "msg-u.json")
    assert state["resumeWhen"] == "time" and state["usageLimitHits"] == 1
    assert datetime.fromisoformat(state["resumeAt"]).timestamp() == reset
    assert run(workspace).outcome.value == "idle"  # before the reset: still waiting
    assert len(fake_claude.task_calls) == 1
    # The reset has passed (we move the moment rather than the clock).
    state["resumeAt"] = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    rewrite_wait(workspace, workspace / "wait_states" / "msg-u.json", state)
    resumed = run(workspace)
    assert resumed.outcome.value == "success" and resumed.iterations == 1
    assert "usage limit has reset" in fake_claude.task_calls[-1]["stdin"]
    assert "iteration 1 of" in fake_claude.task_calls[-1]["stdin"]
    assert not (workspace / "wait_states" / "msg-u.json").exists()


def test_a_session_that_no_longer_exists_starts_fresh(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    spec_wait(
        workspace,
        "msg-s",
        resumeWhen="time",
        sessionId="gone-123",
        resumeAt=(datetime.now(UTC) - timedelta(minutes=1)).isoformat(),
    )
    fake_claude.answers({"session_missing": True, "status": "success"})
    report = run(workspace)
    assert report.outcome.value == "success"
    assert "SESSION_MISSING_FRESH_START" in report.reason_codes
    first, second = fake_claude.task_calls
    assert "--resume" in first["argv"] and "gone-123" in first["argv"]
    assert "--resume" not in second["argv"]
    assert "The time condition is met" in second["stdin"]


def spec_wait(ws: Path, task_id: str, **extra: Any) -> Path:
    """A wait-state file exactly in the specification's format (plus `extra`)."""
    data = {
        "taskId": task_id,
        "timestamp": "2026-02-11T10:30:00Z",
        "reason": "Attente validation utilisateur",
        "waitFor": "User approval via INTERCOM",
        "resumeWhen": "user_approval",
        "context": {
            "mode": "code-complex",
            "model": "opus",
            "iteration": 3,
            "outputSnippet": "...",
        },
    }
    data.update(extra)
    data.setdefault("expiresAt", (datetime.now(UTC) + timedelta(days=7)).isoformat())
    path = ws / "wait_states" / f"{task_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    adopt(load_settings(ws), path.name)  # `worker waits adopt`: a person vouches for it
    return path


def test_a_file_in_exactly_the_specifications_format_is_resumed(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spec's own example, byte for byte: refused until a person adopts it (`worker waits
    adopt`), then resumed like worker's own. Its timestamp is old, so the expiry is raised."""
    monkeypatch.setenv("WORKER_WAITS__EXPIRY_DAYS", "30")
    path = workspace / "wait_states" / "msg-20260211-abc123.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                "taskId": "msg-20260211-abc123",
                "timestamp": (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "reason": "Attente validation utilisateur",
                "waitFor": "User approval via INTERCOM",
                "resumeWhen": "user_approval",
                "context": {
                    "mode": "code-complex",
                    "model": "opus",
                    "iteration": 3,
                    "outputSnippet": "...",
                },
            },
            indent=2,
        )
    )
    listed = json.loads(cli(workspace, "waits", "list", "--json").stdout)
    assert listed["waits"] == [] and "WAIT_STATE_UNRECORDED" in listed["unreadable"][0]
    adopted = cli(workspace, "waits", "adopt", path.name, "--json")
    assert adopted.exit_code == 0, adopted.output
    listed = json.loads(cli(workspace, "waits", "list", "--json").stdout)
    assert listed["waits"][0]["task_id"] == "msg-20260211-abc123"
    assert cli(workspace, "waits", "approve", "msg-20260211-abc123").exit_code == 0
    report = run(workspace)
    assert report.outcome.value == "success" and report.modes == ["code-complex"]
    call = fake_claude.task_calls[-1]
    assert "--resume" not in call["argv"]  # the spec has no session: a fresh one
    assert call["argv"][call["argv"].index("--model") + 1] == "opus"
    assert "Mode code-complex, iteration 3 of" in call["stdin"]
    assert not path.exists()


def test_a_corrupt_wait_state_beside_good_ones(workspace: Path, fake_claude: FakeAgent) -> None:
    past = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    spec_wait(workspace, "good-1", resumeWhen="time", resumeAt=past)
    (workspace / "wait_states" / "bad.json").write_text('{"taskId": "bad", "timest')
    report = run(workspace)
    assert report.outcome.value == "success" and report.task_id == "good-1"
    assert "SOURCE_ERROR" in report.reason_codes
    assert (workspace / "wait_states" / "rejected" / "bad.json").exists()
    assert (workspace / "wait_states" / "rejected" / "bad.json.reason.txt").read_text()


def test_roosync_reply_resumes_and_is_consumed_not_taken_as_a_task(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    write_message(workspace, "msg-r", subject="Sync with the other machine")
    fake_claude.answers(
        {
            "status": "wait",
            "wait_for": "the other machine's numbers",
            "resume_when": "roosync_response",
        },
        {"status": "success"},
    )
    assert run(workspace).outcome.value == "waiting"
    assert run(workspace).outcome.value == "idle"
    write_message(
        workspace,
        "reply-1",
        **{"from": "other-machine", "in_reply_to": "msg-r", "body": "numbers: 4, 8, 15"},
    )
    resumed = run(workspace)
    assert resumed.task_id == "msg-r" and resumed.outcome.value == "success"
    assert "numbers: 4, 8, 15" in fake_claude.task_calls[-1]["stdin"]
    assert run(workspace).outcome.value == "idle"
    assert (workspace / "inbox" / "done" / "reply-1.json").exists()
    assert len(fake_claude.task_calls) == 2


def test_an_expired_wait_is_an_outcome_reported_to_its_source(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    write_message(workspace, "msg-x")
    fake_claude.answers({"status": "wait", "resume_when": "intercom_message"})
    assert run(workspace).outcome.value == "waiting"
    path = workspace / "wait_states" / "msg-x.json"
    state = json.loads(path.read_text())
    state["expiresAt"] = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    rewrite_wait(workspace, path, state)
    assert run(workspace).outcome.value == "idle"
    reply = json.loads((workspace / "inbox" / "outbox" / "msg-x-expired-reply.json").read_text())
    assert reply["to"] == "alice" and reply["in_reply_to"] == "msg-x"
    assert (workspace / "wait_states" / "expired" / "msg-x.json").exists()


def test_a_worker_killed_during_the_resumed_run_leaves_the_wait_to_resume_again(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    past = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    path = spec_wait(workspace, "msg-k", resumeWhen="time", resumeAt=past, sessionId="s-1")
    fake_claude.answers({"hang": 120}, {"status": "success"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker", "run", "--workspace", str(workspace)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    try:
        for _ in range(600):  # the agent has started (at most a minute)
            if fake_claude.calls or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert fake_claude.calls and proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
    agent_pid = fake_claude.calls[0]["pid"]
    end_group(agent_pid, grace_s=0)  # on Windows its job already ended it with the worker
    assert path.exists()
    db = sqlite3.connect(state_of(workspace) / "worker.db")
    assert db.execute("SELECT state FROM claims WHERE task_id = 'msg-k'").fetchone() == ("active",)
    db.close()
    report = run(workspace)
    assert report.task_id == "msg-k" and report.outcome.value == "success"
    assert not path.exists()
    second = fake_claude.task_calls[-1]
    assert second["argv"][second["argv"].index("--resume") + 1] == "s-1"
    shown = cli(workspace, "waits", "list", "--json")
    assert json.loads(shown.stdout)["waits"] == []
