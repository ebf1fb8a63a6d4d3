"""Infrastructure failures are not task failures: a bad key, an unavailable API, a missing or
broken agent program. Read from the real Claude Code's recorded streams (the fake `claude`
replays them), handled the same way for every adapter."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.github_server import FakeGitHub, settings_for
from worker.agents.claude import StreamCollector
from worker.agents.claude_stream import infra_failure
from worker.agents.infra import executable_problem
from worker.cli.app import app
from worker.config import load_settings
from worker.errors import ConfigError
from worker.models import InfraKind
from worker.run.runner import RunOptions, RunReport, run_once

from .conftest import (
    GITHUB_REPO,
    TRANSCRIPTS,
    FakeAgent,
    rewrite_wait,
    run_worker,
    state_of,
    write_message,
)

RETRIES_401 = TRANSCRIPTS / "claude-real-401-retries.jsonl"
RETRIES_529 = TRANSCRIPTS / "claude-real-529-retries.jsonl"
RESULT_401 = TRANSCRIPTS / "claude-real-401-result.jsonl"
RESULT_529 = TRANSCRIPTS / "claude-real-529-result.jsonl"


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    # A stream that is not cut off would run into this instead, and the test would say so.
    monkeypatch.setenv("WORKER_ITERATION_TIMEOUT_S", "60")


def run(ws: Path) -> RunReport:
    return run_once(load_settings(ws), RunOptions())


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def iterations(ws: Path) -> int:
    db = sqlite3.connect(state_of(ws) / "worker.db")
    return int(db.execute("SELECT COUNT(*) FROM iterations").fetchone()[0])


def test_the_real_clis_events_are_classified() -> None:
    """api_retry 401 is authentication, 529 is an unavailable API; the final results too, with
    the CLI's own words in the message."""
    assert infra_failure(lines(RETRIES_401)[1]).kind is InfraKind.AUTH  # type: ignore[union-attr]
    assert infra_failure(lines(RETRIES_529)[1]).kind is InfraKind.UNAVAILABLE  # type: ignore[union-attr]
    auth = infra_failure(lines(RESULT_401)[-1])
    assert auth is not None and auth.kind is InfraKind.AUTH and auth.http_status == 401
    assert auth.message == (
        "Claude Code could not authenticate: Invalid API key · Fix external API key (HTTP 401)"
    )
    assert auth.setting == "ANTHROPIC_API_KEY"
    down = infra_failure(lines(RESULT_529)[-1])
    assert down is not None and down.kind is InfraKind.UNAVAILABLE and "529" in down.message


def test_task_errors_and_usage_limits_are_not_infrastructure() -> None:
    """A refused request (400), a success and a usage limit are not classified here."""
    base = {"type": "result", "is_error": True, "subtype": "success"}
    assert infra_failure({**base, "api_error_status": 400, "result": "prompt too long"}) is None
    assert infra_failure({**base, "result": "You've hit your limit · resets 1pm"}) is None
    assert infra_failure({"type": "result", "is_error": False, "result": "done"}) is None
    network = infra_failure({**base, "terminal_reason": "api_error", "result": "fetch failed"})
    assert network is not None and network.kind is InfraKind.UNAVAILABLE


def test_a_bad_key_halts_at_the_first_retry_an_overload_at_the_third() -> None:
    for path, halts_at in ((RETRIES_401, 1), (RETRIES_529, 3)):
        collector = StreamCollector()
        stops = [collector.feed(line) for line in path.read_text().splitlines()]
        first = next(i for i, stop in enumerate(stops) if stop)
        assert first == halts_at, path.name  # line 0 is system/init
        assert stops[first].startswith("infrastructure: Claude Code could")  # type: ignore[union-attr]


def test_a_bad_key_leaves_the_task_untouched_and_exits_78(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """The CLI retrying a 401 is ended at once; the message goes back to the inbox unread, no
    iteration counts, and the run says what to fix."""
    fake_claude.answers({"replay": str(RETRIES_401), "hang": 120})
    message = write_message(workspace, "msg-1")
    report = run(workspace)
    assert report.exit_code == 78 and report.infra == "auth"
    assert report.outcome.value == "stopped" and "AGENT_AUTH_FAILED" in report.reason_codes
    assert "could not authenticate" in report.reason and "ANTHROPIC_API_KEY" in report.reason
    assert json.loads(message.read_text())["status"] == "unread"
    assert not (workspace / "inbox" / "done").exists() or not any(
        (workspace / "inbox" / "done").iterdir()
    )
    assert not (workspace / "inbox" / "outbox" / "msg-1-failure-reply.json").exists()
    note = json.loads((workspace / "inbox" / "outbox" / "msg-1-stopped-reply.json").read_text())
    assert "could not authenticate" in note["body"]
    assert iterations(workspace) == 0
    db = sqlite3.connect(state_of(workspace) / "worker.db")
    assert db.execute("SELECT state FROM claims WHERE task_id='msg-1'").fetchone()[0] == "released"


def test_an_auth_result_after_the_clis_own_retries_is_the_same(
    workspace: Path, fake_claude: FakeAgent, tmp_path: Path
) -> None:
    """The CLI giving up by itself (no retry seen, exit 1, is_error, HTTP 401): same outcome,
    in the CLI's words."""
    result_only = tmp_path / "result.jsonl"
    kept = [line for line in RESULT_401.read_text().splitlines() if "api_retry" not in line]
    result_only.write_text("\n".join(kept) + "\n")
    fake_claude.answers({"replay": str(result_only), "exit": 1})
    write_message(workspace, "msg-1")
    report = run(workspace)
    assert report.exit_code == 78
    assert report.reason.startswith(
        "Claude Code could not authenticate: Invalid API key · Fix external API key (HTTP 401)"
    )


def test_an_unavailable_api_turns_the_task_into_a_timed_wait(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """529 on every call: the agent is ended at the 3rd retry, the task waits 5 minutes, then
    15 on the next failure; no iteration counts, nothing escalates, the run exits 0."""
    fake_claude.answers({"replay": str(RETRIES_529), "hang": 120})
    write_message(workspace, "msg-1")
    report = run(workspace)
    assert report.outcome.value == "waiting" and report.exit_code == 0
    assert report.reason_codes[-1] == "AGENT_API_UNAVAILABLE" and report.modes == ["code-simple"]
    assert "could not reach the model API" in report.reason and iterations(workspace) == 0
    state_path = Path(report.wait_state or "")
    state = json.loads(state_path.read_text())
    assert state["resumeWhen"] == "time"
    wait = datetime.fromisoformat(state["resumeAt"]) - datetime.now(UTC)
    assert timedelta(minutes=4) < wait <= timedelta(minutes=5)
    reply = json.loads((workspace / "inbox" / "outbox" / "msg-1-waiting-reply.json").read_text())
    assert "could not reach the model API" in reply["body"]

    # Time passes; the API still fails: the next wait is longer.
    state["resumeAt"] = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    rewrite_wait(workspace, state_path, state)
    again = run(workspace)
    assert again.outcome.value == "waiting" and again.task_id == "msg-1"
    state = json.loads(Path(again.wait_state or "").read_text())
    wait = datetime.fromisoformat(state["resumeAt"]) - datetime.now(UTC)
    assert timedelta(minutes=14) < wait <= timedelta(minutes=15)
    assert iterations(workspace) == 0

    # The API is back: the same iteration runs, told why it was interrupted, and succeeds.
    fake_claude.answers({"status": "success", "reason": "done"})
    state["resumeAt"] = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    rewrite_wait(workspace, Path(again.wait_state or ""), state)
    done = run(workspace)
    assert done.outcome.value == "success" and iterations(workspace) == 1
    prompt = fake_claude.task_calls[-1]["stdin"]
    assert "The model API was unavailable" in prompt and "iteration 1 of" in prompt


def test_a_cli_crash_is_an_agent_error_named_in_words(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """Exit 1 without a result event: an ordinary agent-error iteration, its reason the CLI's."""
    fake_claude.answers({"crash": "TypeError: cannot read x of undefined"}, {"status": "success"})
    write_message(workspace, "msg-1")
    report = run(workspace)
    assert report.outcome.value == "success" and report.iterations == 2
    db = sqlite3.connect(state_of(workspace) / "worker.db")
    reason = db.execute("SELECT reason FROM iterations ORDER BY id").fetchone()[0]
    assert reason == (
        "agent_error: Claude Code exited with code 1 without a result: "
        "TypeError: cannot read x of undefined"
    )


def test_a_success_block_from_an_agent_that_exited_non_zero_is_not_success(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """Exit 1 after `STATUS: success`: an agent error; the next iteration's word counts."""
    fake_claude.answers({"status": "success", "exit": 1}, {"status": "success"})
    write_message(workspace, "msg-1")
    report = run(workspace)
    assert report.outcome.value == "success" and report.iterations == 2
    assert "AGENT_ERROR" in report.reason_codes
    db = sqlite3.connect(state_of(workspace) / "worker.db")
    first = db.execute("SELECT status, reason FROM iterations ORDER BY id").fetchone()
    assert first == ("continue", "agent_error: exited with code 1 after writing STATUS: success")


def test_ten_runs_with_a_missing_binary_touch_no_message(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The preflight runs before any claim: every run is a configuration error, and every
    message stays where it was, unread."""
    monkeypatch.setenv("WORKER_CLAUDE_BIN", "no-such-claude-anywhere")
    messages = [write_message(workspace, f"msg-{n}") for n in range(10)]
    before = {path: path.read_bytes() for path in messages}
    for _ in range(10):
        with pytest.raises(ConfigError, match="`no-such-claude-anywhere` was not found on PATH"):
            run(workspace)
    assert {path: path.read_bytes() for path in messages} == before
    assert not (workspace / "inbox" / "claimed").exists() or not any(
        (workspace / "inbox" / "claimed").iterdir()
    )
    db = sqlite3.connect(state_of(workspace) / "worker.db")
    assert db.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0


def test_the_missing_binary_exits_78_and_worker_why_says_what_to_fix(
    workspace: Path, tmp_path: Path
) -> None:
    """The real command: exit 78, the message on stderr naming claude_bin; `worker why` too."""
    folder = tmp_path / "claude-folder"
    folder.mkdir()
    write_message(workspace, "msg-1")
    env = {"WORKER_CLAUDE_BIN": str(folder)}
    done = run_worker(workspace, "run", env=env)
    assert done.returncode == 78, done.stderr
    assert f"{folder} is a folder, not a program" in done.stderr
    assert "WORKER_CLAUDE_BIN" in done.stderr
    why = run_worker(workspace, "why", env=env)
    assert why.returncode == 0 and "is a folder, not a program" in why.stdout


def test_executable_problems_are_named(tmp_path: Path) -> None:
    script = tmp_path / "claude"
    script.write_text("#!/bin/sh\n")
    assert executable_problem(str(script)) == f"{script} is not executable"
    script.chmod(0o755)
    assert executable_problem(str(script)) is None
    assert executable_problem(str(tmp_path)) == f"{tmp_path} is a folder, not a program"
    assert executable_problem(str(tmp_path / "nope")) == f"{tmp_path / 'nope'} does not exist"


def test_a_bad_key_on_a_github_issue_leaves_it_open_without_a_failure_label(
    workspace: Path, fake_claude: FakeAgent, fake_github: FakeGitHub
) -> None:
    """The claim is undone (label, assignee) and the status comment says why, in words; the
    issue gets no failure label and stays open for the next run."""
    fake_github.add_issue(GITHUB_REPO, 7, title="Fix it", labels=("roo-schedulable",))
    section = settings_for(fake_github)
    toml = ["[github]"] + [f"{key} = {json.dumps(value)}" for key, value in section.items()]
    (workspace / "worker.toml").write_text("\n".join(toml) + "\n")
    fake_claude.answers({"replay": str(RETRIES_401), "hang": 120})
    report = run(workspace)
    assert report.exit_code == 78 and report.task_id == f"{GITHUB_REPO}#7"
    labels = fake_github.labels_of(GITHUB_REPO, 7)
    assert "worker:failed" not in labels and "worker:in-progress" not in labels
    assert fake_github.repos[GITHUB_REPO]["issues"][7]["state"] == "open"
    (comment,) = fake_github.comments_of(GITHUB_REPO, 7)
    assert "Claude Code could not authenticate" in comment["body"]


def test_an_agent_that_cannot_start_after_the_preflight_leaves_the_task(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program that passes the preflight but cannot start (its interpreter is gone): the
    task is released as it was and the run exits 78, naming the cause and the setting."""
    program = tmp_path / "claude"
    program.write_text("#!/no/such/interpreter\n")
    program.chmod(0o755)
    monkeypatch.setenv("WORKER_CLAUDE_BIN", str(program))
    message = write_message(workspace, "msg-1")
    report = run(workspace)
    assert report.exit_code == 78 and report.infra == "missing_binary"
    assert report.reason_codes[-1] == "AGENT_NOT_FOUND"
    assert report.reason.startswith(f"Claude Code cannot start: cannot start {program}")
    assert "claude_bin (WORKER_CLAUDE_BIN)" in report.reason
    assert json.loads(message.read_text())["status"] == "unread"


def test_an_approval_met_by_an_outage_reaches_the_agent_after_it(
    workspace: Path, fake_claude: FakeAgent, cli: Any
) -> None:
    """Approved, resumed into an overloaded API, twice: the approval note the model never
    read is in the prompt when the API is back, once."""
    fake_claude.answers(
        {"status": "wait", "reason": "destructive", "resume_when": "user_approval"},
        {"replay": str(RETRIES_529), "hang": 120},
        {"replay": str(RETRIES_529), "hang": 120},
        {"status": "success", "reason": "done"},
    )
    write_message(workspace, "msg-1")
    assert run(workspace).outcome.value == "waiting"
    approved = cli.invoke(
        app, ["waits", "approve", "msg-1", "--note", "yes, drop it", "--workspace", str(workspace)]
    )
    assert approved.exit_code == 0, approved.output
    for _ in range(2):
        outage = run(workspace)
        assert outage.reason_codes[-1] == "AGENT_API_UNAVAILABLE"
        path = Path(outage.wait_state or "")
        state = json.loads(path.read_text())
        state["resumeAt"] = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
        rewrite_wait(workspace, path, state)
    assert run(workspace).outcome.value == "success"
    prompt = fake_claude.task_calls[-1]["stdin"]
    assert prompt.count("yes, drop it") == 1 and "The model API was unavailable" in prompt


def test_a_bad_key_said_in_plain_text_is_an_authentication_failure(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """A CLI that prints "Invalid API key" on stderr and exits 1, without a stream."""
    fake_claude.answers({"crash": "Invalid API key · Please run /login"})
    write_message(workspace, "msg-1")
    report = run(workspace)
    assert report.exit_code == 78 and report.infra == "auth"
    assert report.reason.startswith(
        "Claude Code could not authenticate: Invalid API key · Please run /login."
    )


def test_a_cli_error_repeating_across_sessions_is_the_infrastructures_failure(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """An error result the adapter cannot classify, the same in three sessions in a row (the
    supervisor's `cli_error` finding): the task waits for the API instead of failing."""
    fake_claude.answers({"is_error": True, "text": "API Error: Connection error (socket hang up)"})
    write_message(workspace, "msg-1")
    report = run(workspace)
    assert report.outcome.value == "waiting", report.reason
    assert "AGENT_API_UNAVAILABLE" in report.reason_codes
    assert "failed the same way in 3 sessions" in report.reason
    assert "socket hang up" in report.reason
    assert len(fake_claude.task_calls) == 3
