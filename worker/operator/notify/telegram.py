"""Commands from Telegram: `/approve TASK [note]`, `/reject TASK [note]`, `/status`,
`/cancel TASK [reason]`, read with `getUpdates` (long polling during `serve`, a quick look
at the start of each run). The offset is kept in the database, so no update is obeyed twice.

Only the chats listed in `notify.telegram.chat_ids` are obeyed; any other chat is ignored
and logged. An approval goes through the same function as `worker waits approve`, in the
name `telegram:<username>`, and every command is recorded with its user and chat.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from worker.config import Settings
from worker.errors import WorkerError
from worker.kernel.control import write_order
from worker.kernel.model import Order
from worker.operator.notify.channels import Bot, SendError, bot_of
from worker.operator.notify.outbox import ensure
from worker.operator.status import summary_lines
from worker.state.known_tasks import require_known
from worker.state.store import Store
from worker.waits.service import note as write_note

log = logging.getLogger(__name__)

OFFSET_KEY = "notify.telegram.offset"
HELP = "Commands: /approve TASK [note], /reject TASK [note], /status, /cancel TASK [reason]"
# Set while `worker serve` long-polls in this process: a run inside it does not poll too
# (Telegram answers 409 to two getUpdates at once).
polling = threading.Event()


def poll(settings: Settings, store: Store, timeout_s: int = 0) -> int:
    """Read and obey the pending commands; returns how many updates were read."""
    bot = bot_of(settings.notify)
    if bot is None:
        return 0
    ensure(store)
    offset = int(store.get(OFFSET_KEY) or 0)
    updates = bot.call(
        "getUpdates",
        {"offset": offset, "timeout": timeout_s, "allowed_updates": ["message"]},
        timeout_s=timeout_s + settings.notify.send_timeout_s,
    )
    for update in updates or []:
        if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
            continue
        handle(settings, store, bot, update)
        store.put(OFFSET_KEY, str(update["update_id"] + 1))
    return len(updates or [])


def handle(settings: Settings, store: Store, bot: Bot, update: dict[str, Any]) -> str:
    """One update: obeyed when its chat is allowed, ignored (and logged) otherwise."""
    message = update.get("message") or {}
    chat = (message.get("chat") or {}).get("id")
    sender = message.get("from") or {}
    user = str(sender.get("username") or sender.get("id") or "unknown")
    text = str(message.get("text") or "")
    if chat not in settings.notify.telegram.chat_ids:
        listed = [*settings.notify.telegram.chat_ids, chat]
        log.warning(
            "telegram: ignored a message from chat %s (user %s): not in notify.telegram.chat_ids;"
            " to allow it, set in worker.toml under [notify.telegram]: chat_ids = %s",
            chat,
            user,
            listed,
        )
        _record(store, update["update_id"], chat, user, text, "ignored: chat not allowed")
        return "ignored"
    answer = execute(settings, text, f"telegram:{user}")
    _record(store, update["update_id"], chat, user, text, answer)
    try:
        bot.call("sendMessage", {"chat_id": chat, "text": answer})
    except SendError as exc:
        log.warning("telegram: answer to %s not sent: %s", chat, exc)
    return answer


def execute(settings: Settings, text: str, by: str) -> str:
    """A command's answer; what it does is done by the same services as the CLI."""
    words = text.strip().split(maxsplit=2)
    command = words[0].split("@", 1)[0].lower() if words else ""
    task = words[1] if len(words) > 1 else ""
    note = words[2] if len(words) > 2 else ""
    try:
        if command in ("/approve", "/reject"):
            if not task:
                return f"usage: {command} TASK [note]"
            done = write_note(
                settings, task, "approval" if command == "/approve" else "rejection", note, by
            )
            kind = done["kind"]
            return f"{kind} of {done['task_id']} noted by {by}; the next run resumes it"
        if command == "/cancel":
            if not task:
                return "usage: /cancel TASK [reason]"
            require_known(settings, task)
            write_order(settings, task, Order.CANCEL, note, sender=by)
            return f"cancel order for {task} written; a running worker obeys it within seconds"
        if command == "/status":
            return "\n".join(summary_lines(settings))
    except WorkerError as exc:
        return f"not done: {exc}"
    return HELP


class Poller:
    """Long polling on a thread while `worker serve` runs."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="telegram-poll", daemon=True)

    def start(self) -> Poller:
        if bot_of(self.settings.notify) is not None:
            polling.set()
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        polling.clear()

    def _loop(self) -> None:
        timeout = self.settings.notify.telegram.poll_timeout_s
        while not self._stop.is_set():
            try:
                with Store(self.settings.db_path) as store:
                    poll(self.settings, store, timeout)
            except Exception as exc:  # an outage must not end serve: wait and try again
                log.warning("telegram: polling failed: %s", exc)
                self._stop.wait(5.0)
            # A pause between polls: a server that answers at once (no long polling) or a
            # zero timeout must not make this a busy loop.
            self._stop.wait(0.5)


def _record(store: Store, update_id: int, chat: Any, user: str, text: str, result: str) -> None:
    with store.transaction() as db:
        db.execute(
            "INSERT OR REPLACE INTO notify_commands(update_id, at, chat_id, user, text, result)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                update_id,
                time.time(),
                chat if isinstance(chat, int) else None,
                user,
                text[:500],
                result[:500],
            ),
        )
