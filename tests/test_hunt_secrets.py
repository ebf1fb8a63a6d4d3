"""Hunted secret leaks: a token the agent repeats reaches no reply, row or notification."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.bot_api import FakeBotAPI
from worker.config import load_settings
from worker.run.runner import run_once
from worker.state.store import Store

from .conftest import FakeAgent, state_of, write_message

LEAKED = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


pytestmark = pytest.mark.usefixtures("only_the_task")


def test_a_token_in_the_agents_reason_is_redacted_from_the_telegram_notification(
    workspace: Path, fake_claude: FakeAgent, bot: FakeBotAPI
) -> None:
    """The `done` notification carries the agent's STATUS reason: a token the agent read and
    repeated there reaches neither the chat nor the notification queue in the database."""
    (workspace / "worker.toml").write_text(
        '[notify]\nevents = ["done"]\n'
        f'[notify.telegram]\nchat_ids = [4242]\napi_base = "{bot.url}"\n',
        encoding="utf-8",
    )
    fake_claude.answers({"status": "success", "reason": f"pushed with {LEAKED}"})
    write_message(workspace, "notified")
    settings = load_settings(workspace)
    assert run_once(settings).outcome.value == "success"
    (sent,) = bot.sent()
    assert "pushed with" in sent["text"] and LEAKED not in sent["text"]
    with Store(settings.db_path) as store:
        rows = store.db.execute("SELECT title, text FROM notify_outbox").fetchall()
    assert rows and all(LEAKED not in f"{title}{text}" for title, text in rows)


LEAKED_IN_WORDS = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def test_a_token_in_the_agents_words_reaches_neither_the_reply_nor_the_database(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """The agent read a token somewhere and repeats it in its last words and its STATUS
    reason: the sender's reply and every row of the database show it redacted."""
    fake_claude.answers(
        {
            "text": f"I found the token {LEAKED_IN_WORDS} in ~/.netrc.",
            "status": "success",
            "reason": LEAKED_IN_WORDS,
        }
    )
    write_message(workspace, "leaky")
    settings = load_settings(workspace)
    assert run_once(settings).outcome.value == "success"
    reply = (workspace / "inbox" / "outbox" / "leaky-success-reply.json").read_text()
    assert "I found the token" in reply
    assert LEAKED_IN_WORDS not in reply
    with Store(settings.db_path) as store:
        tables = [
            r[0] for r in store.db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        for table in tables:
            for row in store.db.execute(f"SELECT * FROM {table}"):
                assert LEAKED_IN_WORDS not in repr(tuple(row)), table


def test_redaction_hides_secret_variables_but_not_the_places_they_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Any variable named like a secret has its value hidden from every text worker keeps;
    one that names where a secret lives (`*_PATH`, `*_FILE`, `*_DIR`) is a path, left readable
    so that an error about that path still says which."""
    from worker.process.proc import redact

    monkeypatch.setenv("MISTRAL_API_KEY", "mk-" + "0123456789abcdef")
    monkeypatch.setenv("SERVICE_PASSWORD", "correct horse battery")
    monkeypatch.setenv("HF_TOKEN_PATH", "/home/dev/.cache/huggingface/token")
    monkeypatch.setenv("SECRETS_DIR", "/run/secrets/worker")
    text = (
        "key mk-0123456789abcdef, password correct horse battery; "
        "cannot read /home/dev/.cache/huggingface/token in /run/secrets/worker"
    )
    assert redact(text) == (
        "key ***, password ***; "
        "cannot read /home/dev/.cache/huggingface/token in /run/secrets/worker"
    )


def test_the_agents_output_log_keeps_no_secret_the_agent_printed(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent CLI holds its model key (it needs it); steered by an issue it prints that key
    and a GitHub token it found. The iteration's output log in the state folder, kept for
    `worker inspect` and post-mortems, shows both as `***` and is still stream-json."""
    model_key = "sk-ant-" + "api03-0a1b2c3d4e5f6g7h8i9j"
    monkeypatch.setenv("ANTHROPIC_API_KEY", model_key)
    fake_claude.answers(
        {
            "text": f"Your key is {model_key} and a token: {LEAKED_IN_WORDS}. token=abc is code.",
            "status": "success",
            "reason": "done",
        }
    )
    write_message(workspace, "printed")
    assert run_once(load_settings(workspace)).outcome.value == "success"
    (log,) = state_of(workspace).rglob("iteration-*.jsonl")
    text = log.read_text(encoding="utf-8")
    assert "Your key is *** and a token: ***. token=abc is code." in text
    assert model_key not in text and LEAKED_IN_WORDS not in text
    assert all(json.loads(line) for line in text.splitlines())
