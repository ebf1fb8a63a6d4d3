"""Telegram's first hour, against a fake Bot API on 127.0.0.1: with `[notify.telegram]` and no
chat yet, the bot still reads its messages and logs each chat's id with the line that allows
it (sending that chat nothing); `doctor` checks every configured channel, its token here and
in the installed schedule's environment; the printed schedule names every secret the
configuration needs; `/status` names the running task, or says idle."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import BOT_TOKEN
from tests.fakes.bot_api import FakeBotAPI
from worker.config import load_settings
from worker.models import Task
from worker.operator.doctor import check_notify, run_doctor
from worker.operator.notify.telegram import execute
from worker.process.platform.schedule import Kind, Target, render, schedule_env
from worker.run.runner import RunOptions, run_once
from worker.state.progress import Tracker
from worker.state.store import Store

pytestmark = pytest.mark.usefixtures("only_the_task")

STRANGER = 9999


def _telegram(ws: Path, bot: FakeBotAPI, chats: str = "") -> None:
    chat_line = f"chat_ids = [{chats}]\n" if chats else ""
    (ws / "worker.toml").write_text(
        f'[notify.telegram]\napi_base = "{bot.url}"\n{chat_line}', encoding="utf-8"
    )


def test_with_no_chat_yet_a_message_is_logged_with_its_chat_id_and_the_line_to_add(
    workspace: Path, bot: FakeBotAPI, caplog: pytest.LogCaptureFixture
) -> None:
    _telegram(workspace, bot)
    bot.user_says(STRANGER, "newcomer", "hello bot")
    with caplog.at_level(logging.WARNING, logger="worker.operator.notify.telegram"):
        run_once(load_settings(workspace), RunOptions())
    said = " ".join(r.getMessage() for r in caplog.records)
    assert f"chat {STRANGER} (user newcomer)" in said
    assert f"chat_ids = [{STRANGER}]" in said and "[notify.telegram]" in said
    assert bot.sent() == []  # nothing is sent to a chat not allowed
    assert any(path.endswith("/getUpdates") for path, _ in bot.requests)
    with Store(load_settings(workspace).db_path) as store:
        row = store.db.execute("SELECT chat_id, result FROM notify_commands").fetchone()
    assert row["chat_id"] == STRANGER and "not allowed" in row["result"]


def test_without_telegram_configured_the_bot_is_never_asked(
    workspace: Path, bot: FakeBotAPI
) -> None:
    """A token in the environment alone starts nothing: another program may own that bot."""
    bot.user_says(STRANGER, "newcomer", "hello bot")
    run_once(load_settings(workspace), RunOptions())
    assert bot.requests == []


def _doctor(ws: Path, env: dict[str, str]) -> list[tuple[str, str]]:
    report = run_doctor(load_settings(ws), env, [("notify", check_notify)])
    return [(f.status.value, f.message) for f in report.findings]


def _home(tmp_path: Path) -> dict[str, str]:
    """A HOME with no crontab program on PATH: only systemd units count."""
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "bin").mkdir(exist_ok=True)
    return {"HOME": str(tmp_path / "home"), "PATH": str(tmp_path / "bin")}


def test_doctor_fails_a_telegram_token_missing_here(
    workspace: Path, bot: FakeBotAPI, tmp_path: Path
) -> None:
    _telegram(workspace, bot, "4242")
    found = _doctor(workspace, _home(tmp_path))
    assert ("fail", "Telegram is configured but TELEGRAM_BOT_TOKEN is not set here: export the "
            "bot's token (from @BotFather) in this variable") in found  # fmt: skip
    assert any(s == "ok" and "needs TELEGRAM_BOT_TOKEN too" in m for s, m in found)


def test_doctor_checks_the_token_works_and_how_to_get_a_chat_id(
    workspace: Path, bot: FakeBotAPI, tmp_path: Path
) -> None:
    _telegram(workspace, bot)
    found = _doctor(workspace, {**_home(tmp_path), "TELEGRAM_BOT_TOKEN": BOT_TOKEN})
    assert ("ok", "the Telegram bot answers (@ws_bot)") in found
    [how] = [m for s, m in found if s == "warn"]
    assert "send the bot a message" in how and "chat_ids = [ID]" in how
    wrong = _doctor(workspace, {**_home(tmp_path), "TELEGRAM_BOT_TOKEN": "1:wrong"})
    assert any(s == "fail" and "token does not work" in m for s, m in wrong)
    assert not any("1:wrong" in m for _, m in wrong)  # never the token itself


def test_doctor_checks_the_token_is_in_the_installed_schedules_environment(
    workspace: Path, bot: FakeBotAPI, tmp_path: Path
) -> None:
    _telegram(workspace, bot, "4242")
    env = {**_home(tmp_path), "TELEGRAM_BOT_TOKEN": BOT_TOKEN}
    units = Path(env["HOME"]) / ".config" / "systemd" / "user"
    units.mkdir(parents=True)
    settings = load_settings(workspace)
    printed = render(
        Kind.SYSTEMD, Target.RUN, settings, sys.executable, schedule_env(env, settings)
    )
    for name, text in printed.files.items():
        (units / name).write_text(text, encoding="utf-8")
    [missing] = [m for s, m in _doctor(workspace, env) if s == "fail"]
    assert "starts without TELEGRAM_BOT_TOKEN" in missing and ".config/worker/env" in missing
    secrets = Path(env["HOME"]) / ".config" / "worker" / "env"
    secrets.parent.mkdir(parents=True)
    secrets.write_text(f"TELEGRAM_BOT_TOKEN={BOT_TOKEN}\n", encoding="utf-8")
    found = _doctor(workspace, env)
    assert not [m for s, m in found if s == "fail"]
    assert any("starts with TELEGRAM_BOT_TOKEN" in m for _, m in found)


def test_the_printed_schedule_names_every_secret_the_configuration_needs(
    workspace: Path, bot: FakeBotAPI
) -> None:
    (workspace / "worker.toml").write_text(
        '[github]\nrepos = ["acme/app"]\n[notify.telegram]\ntoken_env = "MY_BOT_TOKEN"\n',
        encoding="utf-8",
    )
    settings = load_settings(workspace)
    env = schedule_env({"PATH": "/usr/bin"}, settings)
    cron = render(Kind.CRON, Target.RUN, settings, sys.executable, env).files["crontab"]
    needs = next(line for line in cron.splitlines() if "Secrets this configuration needs" in line)
    for name in ("WORKER_GITHUB_TOKEN", "MY_BOT_TOKEN", "ANTHROPIC_API_KEY"):
        assert name in needs
    unit = next(
        iter(render(Kind.SYSTEMD, Target.RUN, settings, sys.executable, env).files.values())
    )
    assert "MY_BOT_TOKEN" in unit.split("EnvironmentFile=")[0]  # said beside the env file
    # Without GitHub or Telegram configured, neither is named.
    (workspace / "worker.toml").write_text("", encoding="utf-8")
    plain = load_settings(workspace)
    bare = render(Kind.CRON, Target.RUN, plain, sys.executable, schedule_env({}, plain))
    assert "WORKER_GITHUB_TOKEN" not in bare.files["crontab"]
    assert "TELEGRAM_BOT_TOKEN" not in bare.files["crontab"]


def test_status_says_idle_not_a_run_without_a_task(workspace: Path) -> None:
    """The run that reads `/status` is open in the runs table with no task yet: that is idle,
    not `running: None (), iteration 0/0`."""
    settings = load_settings(workspace)
    with Store(settings.db_path) as store:
        store.start_run(settings.machine_id, os.getpid())
    answer = execute(settings, "/status", "telegram:alice")
    assert "running: nothing (idle)" in answer and "None" not in answer


def test_status_names_the_running_task_with_its_iteration(workspace: Path) -> None:
    settings = load_settings(workspace)
    task = Task(id="msg-1", source="inbox", title="Fix the parser", body="", mode="code-simple")
    with Store(settings.db_path) as store:
        run_id = store.start_run(settings.machine_id, os.getpid())
        Tracker(store, run_id, task).step("code-simple", "sonnet", 2, 5, 1, 0.12)
        answer = execute(settings, "/status", "telegram:alice")
    assert "running: msg-1 (Fix the parser), iteration 2/5" in answer


def test_doctor_names_the_webhooks_host_never_its_secret_path(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "worker.toml").write_text(
        '[notify.webhook]\nurl = "https://hooks.slack.com/services/T0/B0/s3cr3tpath"\n',
        encoding="utf-8",
    )
    found = _doctor(workspace, _home(tmp_path))
    assert ("ok", "webhook: each notification is posted to hooks.slack.com") in found
    assert not any("s3cr3tpath" in m for _, m in found)
    assert not any("Telegram" in m for _, m in found)  # not configured: not checked


def test_doctor_says_when_no_channel_is_configured(workspace: Path, tmp_path: Path) -> None:
    [(status, said)] = _doctor(workspace, _home(tmp_path))
    assert status == "ok" and said.startswith("no notifications configured")
