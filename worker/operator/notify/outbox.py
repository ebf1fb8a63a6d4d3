"""The outbox: every notification is a row first, then sent; a failed send stays and is
retried on the next run (or the next `serve` cycle), so a channel that is down never holds
up a task. A key per notification and channel makes a repeated event a no-op."""

from __future__ import annotations

import logging
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from worker.config import Settings
from worker.humanize import visible
from worker.process.lazyimport import lazy
from worker.state.store import Store, script

_proc = lazy("worker.process.proc")  # redact(): the texts carry the agent's words

log = logging.getLogger(__name__)


def _v1(db: sqlite3.Connection) -> None:
    script(
        db,
        """
        CREATE TABLE notify_outbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at REAL NOT NULL,
            key TEXT NOT NULL UNIQUE,
            channel TEXT NOT NULL,
            event TEXT NOT NULL,
            task_id TEXT,
            title TEXT NOT NULL,
            text TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            sent_at REAL
        );
        CREATE TABLE notify_commands (
            update_id INTEGER PRIMARY KEY,
            at REAL NOT NULL,
            chat_id INTEGER,
            user TEXT,
            text TEXT NOT NULL,
            result TEXT NOT NULL
        );
        """,
    )


MIGRATIONS = [_v1]


def ensure(store: Store) -> Store:
    store.ensure("notify", MIGRATIONS)
    return store


@dataclass
class Flushed:
    sent: int = 0
    failed: int = 0


def channels(settings: Settings) -> list[str]:
    """`telegram:<chat id>` for each allowed chat, and `webhook` when a URL is set."""
    found = [f"telegram:{chat}" for chat in settings.notify.telegram.chat_ids]
    return found + (["webhook"] if settings.notify.webhook.url else [])


def enqueue(
    settings: Settings,
    store: Store,
    event: str,
    key: str,
    title: str,
    text: str,
    task_id: str | None = None,
) -> int:
    """Queue one notification on every channel, unless its event is not wanted; returns how
    many rows were added (0 for a repeat)."""
    if event not in settings.notify.events:
        return 0
    added = 0
    # The agent's words, masked, and their control characters shown (a chat or a webhook's
    # subscriber, such as `ntfy subscribe`, may print them to a terminal).
    title, text = visible(_proc.redact(title)), visible(_proc.redact(text))
    ensure(store)
    with store.transaction() as db:
        for channel in channels(settings):
            cur = db.execute(
                "INSERT OR IGNORE INTO notify_outbox(created_at, key, channel, event, task_id,"
                " title, text) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (time.time(), f"{key}|{channel}", channel, event, task_id, title, text[:3500]),
            )
            added += cur.rowcount
    return added


def flush(settings: Settings, store: Store) -> Flushed:
    """Send what is pending, oldest first. A channel that fails is not tried again in this
    flush (one timeout per run at most), and its rows wait for the next one; a chat Telegram
    refuses (blocked, not found) holds back that chat only."""
    # Here, not at the top: `status` and runs with nothing to send never talk to a channel.
    from worker.operator.notify.channels import SendError

    ensure(store)
    cfg = settings.notify
    rows = store.db.execute(
        "SELECT * FROM notify_outbox WHERE sent_at IS NULL AND attempts < ? ORDER BY id",
        (cfg.max_attempts,),
    ).fetchall()
    done, down = Flushed(), set()
    for row in rows:
        kind = row["channel"].split(":", 1)[0]
        if kind in down or row["channel"] in down:
            continue
        try:
            _send(settings, dict(row))
        except SendError as exc:
            down.add(row["channel"] if exc.refused else kind)
            done.failed += 1
            log.warning("notify: %s not sent to %s: %s", row["event"], row["channel"], exc)
            with store.transaction() as db:
                db.execute(
                    "UPDATE notify_outbox SET attempts = attempts + 1, last_error = ? WHERE id = ?",
                    (str(exc)[:500], row["id"]),
                )
            continue
        done.sent += 1
        with store.transaction() as db:
            db.execute(
                "UPDATE notify_outbox SET attempts = attempts + 1, sent_at = ?, last_error = NULL"
                " WHERE id = ?",
                (time.time(), row["id"]),
            )
    return done


def pending(store: Store) -> list[dict[str, Any]]:
    ensure(store)
    rows = store.db.execute(
        "SELECT id, created_at, channel, event, task_id, attempts, last_error FROM notify_outbox"
        " WHERE sent_at IS NULL ORDER BY id"
    )
    return [dict(row) for row in rows]


def _send(settings: Settings, row: dict[str, Any]) -> None:
    from worker.operator.notify.channels import (  # see flush
        SendError,
        bot_of,
        post_json,
        webhook_body,
    )

    cfg = settings.notify
    if row["channel"] == "webhook":
        assert cfg.webhook.url is not None
        body = webhook_body(
            row["title"], row["text"], row["event"], row["task_id"], cfg.webhook.topic
        )
        post_json(cfg.webhook.url, body, cfg.send_timeout_s)
        return
    bot = bot_of(cfg)
    if bot is None:
        raise SendError(f"the bot token variable {cfg.telegram.token_env} is not set")
    chat = int(row["channel"].split(":", 1)[1])
    text = f"{row['title']}\n{row['text']}"
    bot.call("sendMessage", {"chat_id": chat, "text": text, "disable_web_page_preview": True})
