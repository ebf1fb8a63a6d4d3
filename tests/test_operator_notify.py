"""Notifications against local servers on 127.0.0.1 (a fake Telegram Bot API and a webhook
receiver): approval requests, approvals from Telegram (allowed chat or not), retries of failed
sends, the daily spend cap, and the spend report."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fakes.bot_api import FakeBotAPI, WebhookReceiver
from worker.cli.app import app
from worker.config import load_settings
from worker.models import Outcome
from worker.operator.notify import outbox
from worker.run.runner import RunOptions, RunReport, run_once
from worker.state.store import Store

from .conftest import FakeAgent, state_of, write_message

ALLOWED, STRANGER = 4242, 9999


pytestmark = pytest.mark.usefixtures("only_the_task")


@pytest.fixture
def hook() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver().start()
    yield server
    server.stop()


def _configure(ws: Path, bot: FakeBotAPI, hook: WebhookReceiver, extra: str = "") -> None:
    (ws / "worker.toml").write_text(
        f"{extra}\n"
        "[notify]\n"
        'events = ["needs_approval", "failed", "done", "crash_loop", "daily_budget"]\n'
        "[notify.telegram]\n"
        f"chat_ids = [{ALLOWED}]\n"
        f'api_base = "{bot.url}"\n'
        "[notify.webhook]\n"
        f'url = "{hook.url}/"\n'
        'topic = "worker-tests"\n',
        encoding="utf-8",
    )


def _run(ws: Path) -> RunReport:
    return run_once(load_settings(ws), RunOptions())


def _ask_approval(fake_claude: FakeAgent, ws: Path) -> RunReport:
    fake_claude.answers(
        {
            "status": "wait",
            "reason": "about to drop a table",
            "wait_for": "May I drop the legacy_users table?",
            "resume_when": "user_approval",
        },
        {"status": "success", "reason": "dropped after approval"},
    )
    write_message(ws, "msg-ask", subject="Clean the schema")
    return _run(ws)


def test_approval_request_reaches_telegram_and_webhook_and_is_approved_from_telegram(
    workspace: Path, fake_claude: FakeAgent, bot: FakeBotAPI, hook: WebhookReceiver
) -> None:
    _configure(workspace, bot, hook)
    assert _ask_approval(fake_claude, workspace).outcome is Outcome.WAITING
    [asked] = bot.sent()
    assert asked["chat_id"] == ALLOWED
    assert "msg-ask (Clean the schema) needs approval" in asked["text"]
    assert "May I drop the legacy_users table?" in asked["text"]
    assert "/approve msg-ask" in asked["text"]
    [body] = hook.bodies()
    assert body["topic"] == "worker-tests" and body["event"] == "needs_approval"
    assert "May I drop the legacy_users table?" in body["text"]  # Slack reads `text`
    assert "May I drop" in body["message"] and "needs approval" in body["title"]  # ntfy

    bot.user_says(ALLOWED, "alice", "/approve msg-ask go ahead")
    report = _run(workspace)  # reads the command first, then resumes the approved task
    assert (report.task_id, report.outcome) == ("msg-ask", Outcome.SUCCESS)
    resumed = fake_claude.task_calls[-1]["stdin"]
    assert "go ahead" in resumed
    reply = bot.sent()[1]
    assert (
        reply["chat_id"] == ALLOWED
        and "approval of msg-ask noted by telegram:alice" in (reply["text"])
    )
    with Store(load_settings(workspace).db_path) as store:
        row = store.db.execute("SELECT chat_id, user, result FROM notify_commands").fetchone()
        assert (row["chat_id"], row["user"]) == (ALLOWED, "alice")
        assert store.get("notify.telegram.offset") == "101"  # the update is not read twice
    done = [b for b in hook.bodies() if b["event"] == "done"]
    assert len(done) == 1 and "msg-ask" in done[0]["title"]


def test_a_command_from_a_chat_not_allowed_is_ignored_and_logged(
    workspace: Path,
    fake_claude: FakeAgent,
    bot: FakeBotAPI,
    hook: WebhookReceiver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _configure(workspace, bot, hook)
    _ask_approval(fake_claude, workspace)
    bot.user_says(STRANGER, "mallory", "/approve msg-ask sure")
    with caplog.at_level(logging.WARNING, logger="worker.operator.notify.telegram"):
        report = _run(workspace)
    assert report.outcome is Outcome.IDLE  # still waiting: nothing approved it
    assert (workspace / "wait_states" / "msg-ask.json").exists()
    assert not list((state_of(workspace) / "intercom").rglob("*.json"))
    assert [m["chat_id"] for m in bot.sent()] == [ALLOWED]  # no answer to the stranger
    assert "ignored a message from chat 9999 (user mallory)" in caplog.text
    with Store(load_settings(workspace).db_path) as store:
        row = store.db.execute("SELECT result FROM notify_commands").fetchone()
        assert row["result"] == "ignored: chat not allowed"


def test_status_cancel_and_unknown_commands_answer_in_the_chat(
    workspace: Path, fake_claude: FakeAgent, bot: FakeBotAPI, hook: WebhookReceiver
) -> None:
    _configure(workspace, bot, hook)
    _ask_approval(fake_claude, workspace)
    bot.user_says(ALLOWED, "alice", "/status")
    bot.user_says(ALLOWED, "alice", "/cancel msg-nope")
    bot.user_says(ALLOWED, "alice", "hello")
    bot.user_says(ALLOWED, "alice", "/cancel@worker_bot msg-ask not needed")
    _run(workspace)
    answers = [m["text"] for m in bot.sent()[1:]]
    assert answers[0].startswith("worker on test-machine") and "waiting: msg-ask" in answers[0]
    assert answers[1].startswith("not done: no task 'msg-nope' is known here")
    assert answers[2].startswith("Commands: /approve TASK")
    assert answers[3].startswith("cancel order for msg-ask written")
    assert not (workspace / "wait_states" / "msg-ask.json").exists()  # the order was obeyed


def test_a_failed_send_is_kept_and_retried_on_the_next_run(
    workspace: Path, fake_claude: FakeAgent, bot: FakeBotAPI, hook: WebhookReceiver
) -> None:
    _configure(workspace, bot, hook)
    fake_claude.answers({"status": "failure", "reason": "cannot compile"})
    write_message(workspace, "msg-fail", subject="Port to Rust")
    hook.fail_next = 1
    report = run_once(load_settings(workspace), RunOptions(mode="sync-complex"))
    assert report.outcome is Outcome.FAILURE  # the task's outcome is not the channel's
    assert hook.bodies() == []
    assert [m["chat_id"] for m in bot.sent()] == [ALLOWED]  # Telegram was up
    with Store(load_settings(workspace).db_path) as store:
        [waiting] = outbox.pending(store)
        assert waiting["channel"] == "webhook" and waiting["attempts"] == 1
        assert "HTTP 500" in waiting["last_error"]
    assert _run(workspace).outcome is Outcome.IDLE
    [body] = hook.bodies()
    assert body["event"] == "failed" and "Port to Rust" in body["title"]
    assert "cannot compile" in body["message"]
    with Store(load_settings(workspace).db_path) as store:
        assert outbox.pending(store) == []


def test_the_bot_token_never_reaches_the_database_or_the_logs(
    workspace: Path,
    fake_claude: FakeAgent,
    bot: FakeBotAPI,
    hook: WebhookReceiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A wrong token: Telegram answers 401; the error is kept and logged without the token."""
    _configure(workspace, bot, hook)
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "999:wrong-secret-token")
    fake_claude.answers({"status": "failure", "reason": "nope"})
    write_message(workspace, "msg-t")
    with caplog.at_level(logging.DEBUG):
        run_once(load_settings(workspace), RunOptions(mode="sync-complex"))
    with Store(load_settings(workspace).db_path) as store:
        rows = [r["last_error"] for r in outbox.pending(store)]
    assert rows and "Unauthorized" in rows[0]
    assert "wrong-secret-token" not in caplog.text
    for path in state_of(workspace).rglob("*"):
        if path.is_file():
            assert b"wrong-secret-token" not in path.read_bytes(), path


def test_daily_cap_makes_new_tasks_wait_for_the_next_day_and_notifies(
    workspace: Path, fake_claude: FakeAgent, bot: FakeBotAPI, hook: WebhookReceiver
) -> None:
    _configure(workspace, bot, hook, extra="daily_cost_cap_usd = 0.05")
    fake_claude.answers({"status": "success", "reason": "done", "cost": 0.06})
    write_message(workspace, "msg-1", subject="First")
    assert _run(workspace).outcome is Outcome.SUCCESS
    write_message(workspace, "msg-2", subject="Second")
    report = _run(workspace)
    assert (report.task_id, report.outcome) == ("msg-2", Outcome.WAITING)
    assert "DAILY_BUDGET_REACHED" in report.reason_codes
    assert len(fake_claude.task_calls) == 1  # the second task never reached the agent
    state = json.loads((workspace / "wait_states" / "msg-2.json").read_text())
    assert state["resumeWhen"] == "time" and state["resumeAt"].endswith("T00:00:00Z")
    assert state["reason"].startswith("DAILY_BUDGET_REACHED: $0.06 spent today")
    budget = [b for b in hook.bodies() if b["event"] == "daily_budget"]
    assert len(budget) == 1 and "daily spend cap ($0.05) is reached" in budget[0]["title"]
    assert any("daily spend cap" in m["text"] for m in bot.sent())
    status = json.loads(CliRunner().invoke(app, ["status", "--json", "-w", str(workspace)]).stdout)
    assert status["spent_today_usd"] == 0.06 and status["daily_cost_cap_usd"] == 0.05


def test_costs_groups_the_spend_and_shows_reviewers_apart(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    fake_claude.answers(
        {"status": "continue", "reason": "more", "cost": 0.02},
        {"status": "success", "reason": "done", "cost": 0.03},
    )
    write_message(workspace, "msg-c")
    assert _run(workspace).outcome is Outcome.SUCCESS
    settings = load_settings(workspace)
    from worker.review import db as review_db

    with Store(settings.db_path) as store:
        review_db.ensure(store)
        store.db.execute(
            "INSERT INTO review_runs(at, reviewer, task_seq, trigger, outcome, cost_usd)"
            " VALUES (strftime('%s','now'), 'style', 1, 'interval', 'ok', 0.5)"
        )

    def costs(*args: str) -> dict[str, object]:
        result = CliRunner().invoke(app, ["costs", *args, "--json", "-w", str(workspace)])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    by_mode = costs("--by", "mode")
    assert by_mode["tasks"] == [{"key": "code-simple", "calls": 2, "runs": 1, "usd": 0.05}]
    assert by_mode["reviewers"] == [{"key": "reviewer style", "calls": 1, "usd": 0.5}]
    assert by_mode["total_tasks_usd"] == 0.05 and by_mode["total_reviewers_usd"] == 0.5
    by_machine = costs("--by", "machine", "--since", "today")
    assert [r["key"] for r in by_machine["tasks"]] == ["test-machine"]
    assert costs("--since", "2999-01-01")["tasks"] == []
    bad = CliRunner().invoke(app, ["costs", "--since", "soon", "-w", str(workspace)])
    assert "--since 'soon'" in str(bad.exception)
    text = CliRunner().invoke(app, ["costs", "--by", "source", "-w", str(workspace)]).stdout
    assert "tasks: $0.0500" in text and "reviewers: $0.5000" in text


def test_serve_reads_commands_by_long_polling_on_a_thread(
    workspace: Path, fake_claude: FakeAgent, bot: FakeBotAPI, hook: WebhookReceiver
) -> None:
    """While the poller runs, runs leave getUpdates to it (Telegram allows one reader)."""
    from worker.operator.notify.telegram import Poller, polling

    _configure(workspace, bot, hook)
    _ask_approval(fake_claude, workspace)
    before = len(bot.requests)
    poller = Poller(load_settings(workspace)).start()
    try:
        assert polling.is_set()
        bot.user_says(ALLOWED, "alice", "/approve msg-ask fine by me")
        deadline = time.monotonic() + 60  # only keeps a broken poller from hanging the suite
        while len(bot.sent()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        report = _run(workspace)  # resumes the approved task; does not poll itself
    finally:
        poller.stop()
    assert not polling.is_set()
    timeouts = {b["timeout"] for p, b in bot.requests[before:] if p.endswith("/getUpdates")}
    assert timeouts == {25}  # the poller's long polls only; a run's quick look uses 0
    assert "approval of msg-ask noted by telegram:alice" in bot.sent()[1]["text"]
    assert (report.task_id, report.outcome) == ("msg-ask", Outcome.SUCCESS)
