"""A scripted model API on 127.0.0.1: what the fake OpenAI and Gemini APIs have in common.

Each model request takes the next `Reply` of the script (the last one repeats when the script
runs out): a stream of server-sent events, an HTTP error with its JSON body, or a hang that lasts
until the server closes (the client's timeout is what ends it). Every request is recorded with
its path, headers and JSON body, so a test can read what the CLI sent (the conversation of a
resumed session, the prompt, the key).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class Reply:
    status: int = 200
    events: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)  # (name, data)
    body: dict[str, Any] | None = None  # the JSON body of an error answer
    hang: bool = False
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: Any
    at: float = 0.0  # time.monotonic() when it arrived


class ScriptedAPI:
    """A threaded HTTP server answering model requests from a script. Subclasses say which
    requests are model requests (`is_model_request`), how other ones are answered (`other`),
    and how an event is framed (`frame`)."""

    def __init__(self, *replies: Reply) -> None:
        self.script: list[Reply] = list(replies)
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    # -- what subclasses define ------------------------------------------------------------
    def is_model_request(self, method: str, path: str) -> bool:
        raise NotImplementedError

    def other(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        return 404, {"error": {"code": 404, "message": f"no route for {method} {path}"}}

    def frame(self, name: str | None, data: dict[str, Any]) -> bytes:
        raise NotImplementedError

    # -- use ---------------------------------------------------------------------------------
    @property
    def base(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        self.thread.start()
        return self

    def close(self) -> None:
        """Stop answering (a closed port from then on); twice is harmless."""
        if self.closing.is_set():
            return
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def play(self, *replies: Reply) -> None:
        with self.lock:
            self.script = list(replies)

    @property
    def model_requests(self) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if self.is_model_request(r.method, r.path)]

    def next_reply(self) -> Reply:
        with self.lock:
            if not self.script:
                raise AssertionError("the scripted API has no reply left")
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]


def _handler(api: ScriptedAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def _serve(self, method: str) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(size) if size else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            with api.lock:
                headers = {name.lower(): value for name, value in self.headers.items()}
                recorded = Recorded(method, self.path, headers, body, time.monotonic())
                api.requests.append(recorded)
            if not api.is_model_request(method, self.path):
                status, answer = api.other(method, self.path, body)
                self._json(status, answer)
                return
            reply = api.next_reply()
            if reply.hang:
                api.closing.wait()
                return
            if reply.status != 200:
                self._json(reply.status, reply.body or {}, reply.headers)
                return
            data = b"".join(api.frame(name, event) for name, event in reply.events)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _json(self, status: int, answer: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(answer).encode()
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
