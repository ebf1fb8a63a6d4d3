"""A scripted Anthropic Messages API on 127.0.0.1, for driving the real Claude Code CLI offline.

The real `claude` reads `ANTHROPIC_BASE_URL`; pointed here, every `POST /v1/messages` is
answered from a script, streamed as server-sent events in the API's own order:
`message_start`, then per content block `content_block_start`, `content_block_delta`
(`text_delta`, or `input_json_delta` for a `tool_use`), `content_block_stop`, then
`message_delta` (stop reason, usage) and `message_stop`.

In tests, the `claude_api` fixture (tests/conftest.py) gives a started server, and
`run_with_real_claude(ws, claude_api, "run", "--json")` runs `worker` with the real CLI
pointed at it:

    claude_api.script(
        tool_use("Write", {"file_path": "/abs/a.txt", "content": "hi"}),  # the CLI runs it
        text("done\n=== AGENT STATUS ===\nSTATUS: success\n...")
    )
    claude_api.always(failure(529))    # the answer once the script is used up (default: text)
    done = run_with_real_claude(ws, claude_api, "run", "--json")
    claude_api.conversation_requests() # the recorded bodies of the model calls, in order
    claude_api.requests                # every request: method, path, headers, body, status

Elsewhere: `api = AnthropicAPI().start()`, run `claude` with `api.env(home)`, `api.stop()`.

Replies: `text(...)`, `tool_use(name, input)` (both are `Turn`s, and a `Turn` can carry several
blocks), `failure(status)` (401, 403, 429, 500, 529 with the API's error JSON), `hang()` (the
answer never comes: the client's timeout or worker's must end it).

The CLI also makes side calls with the same endpoint (a title, a quota probe with
`max_tokens: 1`); they get a short text and do not use up the script. Requests to other paths
are recorded and answered 404.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
ERROR_MESSAGES = {401: "invalid x-api-key", 529: "Overloaded", 500: "Internal server error"}


@dataclass
class Turn:
    """One assistant message: content blocks (`{"type": "text"|"tool_use", ...}`)."""

    blocks: list[dict[str, Any]]
    stop_reason: str = "end_turn"

    def __add__(self, other: Turn) -> Turn:
        stop = "tool_use" if "tool_use" in (self.stop_reason, other.stop_reason) else "end_turn"
        return Turn(self.blocks + other.blocks, stop)


@dataclass
class Failure:
    status: int
    message: str = ""


@dataclass
class Hang:
    pass


Reply = Turn | Failure | Hang
_ids = itertools.count(1)


def text(value: str) -> Turn:
    return Turn([{"type": "text", "text": value}])


def tool_use(name: str, args: dict[str, Any]) -> Turn:
    block = {"type": "tool_use", "id": f"toolu_{next(_ids):06d}", "name": name, "input": args}
    return Turn([block], "tool_use")


def failure(status: int, message: str = "") -> Failure:
    return Failure(status, message)


def hang() -> Hang:
    return Hang()


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0


def is_conversation(body: Any) -> bool:
    """A model call of the agent's own conversation (it offers tools), not a side call."""
    return isinstance(body, dict) and bool(body.get("tools")) and body.get("max_tokens", 0) > 1


@dataclass
class AnthropicAPI:
    host: str = "127.0.0.1"
    requests: list[Recorded] = field(default_factory=list)
    _script: list[Reply] = field(default_factory=list)
    _always: Reply = field(default_factory=lambda: text("ok"))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _release: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None

    # -- scripting ---------------------------------------------------------------------
    def script(self, *replies: Reply) -> None:
        """Answer the next conversation calls with these, in order."""
        with self._lock:
            self._script.extend(replies)

    def always(self, reply: Reply) -> None:
        """Answer every conversation call with this once the script is used up."""
        self._always = reply

    def conversation_requests(self) -> list[dict[str, Any]]:
        return [
            r.body
            for r in self.requests
            if r.path.startswith("/v1/messages") and is_conversation(r.body)
        ]

    def env(self, home: str) -> dict[str, str]:
        """The environment a real `claude` needs to talk only to this server."""
        return {
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": "sk-ant-test-dummy",
            "HOME": home,
            "CLAUDE_CONFIG_DIR": f"{home}/.claude",
            # No telemetry, error reports, update checks or other traffic off this host.
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_UPDATES": "1",
            "DISABLE_GROWTHBOOK": "1",
            "DISABLE_INSTALLATION_CHECKS": "1",
        }

    # -- serving -----------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://{self.host}:{self._server.server_address[1]}"

    def start(self) -> AnthropicAPI:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                api._record(self, None)
                self._json(404, _error_body(404, "not found"))

            def do_HEAD(self) -> None:
                api._record(self, None)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                record = api._record(self, body)
                if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
                    record.status = 404
                    self._json(404, _error_body(404, "not found"))
                    return
                reply = api._next(body)
                if isinstance(reply, Hang):
                    record.status = 0
                    api._release.wait(600)
                    return
                if isinstance(reply, Failure):
                    record.status = reply.status
                    self._json(reply.status, _error_body(reply.status, reply.message))
                    return
                record.status = 200
                self._stream(reply, body)

            def _json(self, status: int, data: Any) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("request-id", f"req_{next(_ids):06d}")
                if status == 529 or status == 429:
                    self.send_header("retry-after", "0")
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, turn: Turn, body: Any) -> None:
                model = body.get("model", "claude-test") if isinstance(body, dict) else "x"
                events = sse_events(turn, model)
                if not (isinstance(body, dict) and body.get("stream")):
                    self._json(200, message_json(turn, model))
                    return
                payload = "".join(
                    f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("request-id", f"req_{next(_ids):06d}")
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer((self.host, 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            with contextlib.suppress(OSError):
                self._server.server_close()

    def _record(self, handler: BaseHTTPRequestHandler, body: Any) -> Recorded:
        headers = {k.lower(): v for k, v in handler.headers.items()}
        record = Recorded(handler.command, handler.path, headers, body)
        with self._lock:
            self.requests.append(record)
        return record

    def _next(self, body: Any) -> Reply:
        if not is_conversation(body):
            # Side calls (title, quota probe) answer like the conversation when it fails.
            return self._always if isinstance(self._always, Failure) else text("ok")
        with self._lock:
            return self._script.pop(0) if self._script else self._always


def _error_body(status: int, message: str) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "api_error")
    return {
        "type": "error",
        "error": {"type": kind, "message": message or ERROR_MESSAGES.get(status, kind)},
    }


def _usage(output: int = 0) -> dict[str, int]:
    return {
        "input_tokens": 100,
        "output_tokens": output,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def message_json(turn: Turn, model: str) -> dict[str, Any]:
    return {
        "id": f"msg_{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": turn.blocks,
        "stop_reason": turn.stop_reason,
        "stop_sequence": None,
        "usage": _usage(20),
    }


def sse_events(turn: Turn, model: str) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events of one streamed message, as the real API sends them."""
    start = {**message_json(Turn([]), model), "content": [], "stop_reason": None}
    start["usage"] = _usage(1)
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for index, block in enumerate(turn.blocks):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            value = block["text"]
            chunks = [value[i : i + 40] for i in range(0, len(value), 40)] or [""]
            deltas = [{"type": "text_delta", "text": chunk} for chunk in chunks]
        else:
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            raw = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": ""}] + [
                {"type": "input_json_delta", "partial_json": raw[i : i + 30]}
                for i in range(0, len(raw), 30)
            ]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": turn.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events
