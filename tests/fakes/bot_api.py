"""Local HTTP servers on 127.0.0.1 for notifications: a fake Telegram Bot API and a webhook
receiver. Both answer in the real formats and record what they were sent.

The Bot API part follows https://core.telegram.org/bots/api: every method is
`POST /bot<token>/<method>` with a JSON body and answers `{"ok": true, "result": ...}` or
`{"ok": false, "error_code": n, "description": "..."}`. `getUpdates` returns the queued
updates whose `update_id` is at least `offset`, and forgets the ones below it (Telegram
treats them as confirmed).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server:
    def __init__(self) -> None:
        self.requests: list[tuple[str, Any]] = []
        self.fail_next = 0  # answer this many requests with HTTP 500
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw.decode("utf-8", "replace")
                with owner.lock:
                    failing = owner.fail_next > 0
                    owner.fail_next -= 1 if failing else 0
                if failing:
                    self._answer(500, {"ok": False, "error_code": 500, "description": "down"})
                    return
                status, answer = owner.answer(self.path, body)
                self._answer(status, answer)

            def _answer(self, status: int, data: Any) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:  # quiet
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> _Server:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, path: str, body: Any) -> tuple[int, Any]:
        with self.lock:
            self.requests.append((path, body))
        return 200, {"ok": True}


class FakeBotAPI(_Server):
    """Telegram's Bot API for one bot token."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token
        self.updates: list[dict[str, Any]] = []
        self.blocked: set[int] = set()  # chats whose user blocked the bot
        self._next_update = 100
        self._next_message = 1

    def user_says(self, chat_id: int, username: str, text: str) -> int:
        """Queue a message from a user in a chat, as Telegram would deliver it."""
        with self.lock:
            update_id = self._next_update
            self._next_update += 1
            self.updates.append(
                {
                    "update_id": update_id,
                    "message": {
                        "message_id": update_id * 10,
                        "from": {"id": chat_id, "is_bot": False, "username": username},
                        "chat": {"id": chat_id, "type": "private", "username": username},
                        "date": 1795600000,
                        "text": text,
                    },
                }
            )
        return update_id

    def sent(self) -> list[dict[str, Any]]:
        """The sendMessage bodies, in order."""
        return [body for path, body in self.requests if path.endswith("/sendMessage")]

    def answer(self, path: str, body: Any) -> tuple[int, Any]:
        prefix = f"/bot{self.token}/"
        if not path.startswith(prefix):
            return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        method = path[len(prefix) :]
        with self.lock:
            self.requests.append((path, body))
            if method == "sendMessage":
                if not isinstance(body, dict) or "chat_id" not in body or not body.get("text"):
                    return 400, {
                        "ok": False,
                        "error_code": 400,
                        "description": "Bad Request: message text is empty",
                    }
                if body["chat_id"] in self.blocked:  # Telegram's answer, word for word
                    return 403, {
                        "ok": False,
                        "error_code": 403,
                        "description": "Forbidden: bot was blocked by the user",
                    }
                message_id = self._next_message
                self._next_message += 1
                result = {
                    "message_id": message_id,
                    "chat": {"id": body["chat_id"], "type": "private"},
                    "date": 1795600000,
                    "text": body["text"],
                }
                return 200, {"ok": True, "result": result}
            if method == "getMe":
                me = {"id": 123456, "is_bot": True, "first_name": "worker", "username": "ws_bot"}
                return 200, {"ok": True, "result": me}
            if method == "getUpdates":
                offset = int((body or {}).get("offset") or 0)
                self.updates = [u for u in self.updates if u["update_id"] >= offset]
                return 200, {"ok": True, "result": list(self.updates)}
        return 404, {"ok": False, "error_code": 404, "description": "Not Found"}


class WebhookReceiver(_Server):
    """Any JSON POST is recorded and answered `{"ok": true}` (ntfy and Slack answer 200)."""

    def bodies(self) -> list[Any]:
        return [body for _, body in self.requests]
