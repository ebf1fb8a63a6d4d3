"""Hunted notification bugs (second round), against the local Telegram Bot API: one chat that
refuses the bot does not silence the others."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.bot_api import FakeBotAPI
from worker.config import load_settings
from worker.operator.notify import outbox
from worker.state.store import Store

BLOCKED, OPEN = 1111, 2222


def test_a_chat_that_blocked_the_bot_does_not_hold_back_the_other_chats_notifications(
    workspace: Path, bot: FakeBotAPI
) -> None:
    """Two chats are notified; one user blocked the bot (Telegram answers 403 for that chat
    only). Run after run, the other chat still gets every notification; the blocked chat's
    are kept and retried, as for any failed send."""
    (workspace / "worker.toml").write_text(
        f'[notify.telegram]\nchat_ids = [{BLOCKED}, {OPEN}]\napi_base = "{bot.url}"\n',
        encoding="utf-8",
    )
    bot.blocked.add(BLOCKED)
    settings = load_settings(workspace)
    with Store(settings.db_path) as store:
        for run in range(3):
            outbox.enqueue(settings, store, "failed", f"task-{run}", f"task-{run} failed", "x")
            outbox.flush(settings, store)
        waiting = outbox.pending(store)
    assert [m["text"].split("\n")[0] for m in bot.sent() if m["chat_id"] == OPEN] == [
        "task-0 failed",
        "task-1 failed",
        "task-2 failed",
    ]
    assert {row["channel"] for row in waiting} == {f"telegram:{BLOCKED}"}
    assert "blocked" in waiting[0]["last_error"]
