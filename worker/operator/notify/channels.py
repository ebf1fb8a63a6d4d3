"""The two channels: Telegram's Bot API and a generic JSON webhook (ntfy, Slack).

One HTTP helper over the standard library. The bot token is part of Telegram's URLs, so
every error text that leaves this module has it replaced by `***`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from worker import secrets
from worker.operator.notify.settings import NotifySettings, telegram_configured

_MAX_ANSWER = 1_000_000


class SendError(Exception):
    """A channel did not take the message; the text names why (never the token). `refused`:
    the service answered and refused this message or chat (a 4xx); it is up for the others."""

    def __init__(self, text: str, refused: bool = False) -> None:
        super().__init__(text)
        self.refused = refused


@dataclass(frozen=True)
class Bot:
    """Telegram's Bot API for one bot: `{api_base}/bot{token}/{method}`."""

    api_base: str
    token: str
    timeout_s: float

    def call(self, method: str, payload: dict[str, Any], timeout_s: float | None = None) -> Any:
        url = f"{self.api_base.rstrip('/')}/bot{self.token}/{method}"
        try:
            answer = post_json(url, payload, timeout_s or self.timeout_s)
        except SendError as exc:
            raise SendError(str(exc).replace(self.token, "***"), exc.refused) from None
        if not isinstance(answer, dict) or not answer.get("ok"):
            what = answer.get("description") if isinstance(answer, dict) else answer
            raise SendError(f"Telegram {method}: {str(what)[:200]}".replace(self.token, "***"))
        return answer.get("result")


def bot_of(settings: NotifySettings) -> Bot | None:
    """The configured bot, or None when Telegram is not configured or its token variable is
    unset. With `[notify.telegram]` but no chat yet, the bot still reads its messages: each
    chat that writes to it is logged with its id and the line that allows it (onboarding)."""
    secrets.remember(secrets.variables_named_by(settings))
    token = os.environ.get(settings.telegram.token_env, "").strip()
    if not telegram_configured(settings) or not token:
        return None
    return Bot(settings.telegram.api_base, token, settings.send_timeout_s)


def webhook_body(title: str, text: str, event: str, task_id: str | None, topic: str | None) -> Any:
    """One JSON body both accept: Slack reads `text`; ntfy's JSON publishing reads `topic`,
    `title` and `message` (unknown fields are ignored by both)."""
    body: dict[str, Any] = {
        "text": f"{title}\n{text}",
        "title": title,
        "message": text,
        "event": event,
        "task": task_id,
    }
    if topic:
        body["topic"] = topic
    return body


def post_json(url: str, payload: Any, timeout_s: float) -> Any:
    """POST JSON, return the JSON answer (or None for an empty or non-JSON one)."""
    # Imported here, not at the top: urllib.request brings http.client, ssl and email (about
    # 15 ms), which every run would pay at start-up though few ever send a notification.
    import urllib.error
    import urllib.request

    data = json.dumps(payload).encode()
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            raw = answer.read(_MAX_ANSWER)
    except urllib.error.HTTPError as exc:
        detail = exc.read(2000).decode("utf-8", "replace")
        with_desc = _description(detail)
        raise SendError(
            f"HTTP {exc.code}: {with_desc or exc.reason}",
            refused=400 <= exc.code < 500 and exc.code != 429,  # 429: slow down, all of us
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SendError(f"cannot reach the server: {reason}") from None
    try:
        return json.loads(raw) if raw.strip() else None
    except json.JSONDecodeError:
        return None


def _description(body: str) -> str:
    try:
        parsed = json.loads(body)
    except json.JSONDecodeError:
        return body[:200]
    return str(parsed.get("description", "")) if isinstance(parsed, dict) else ""
