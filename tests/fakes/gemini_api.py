"""A scripted Gemini API on 127.0.0.1, as Gemini CLI calls it with `GOOGLE_GEMINI_BASE_URL`:
`POST /v1beta/models/<model>:streamGenerateContent?alt=sse` answered with server-sent events,
one `GenerateContentResponse` each (shapes: the Gemini API reference, generateContent).
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.scripted_api import Reply, ScriptedAPI

_STATUS = {
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


class FakeGeminiAPI(ScriptedAPI):
    def is_model_request(self, method: str, path: str) -> bool:
        return method == "POST" and ":streamGenerateContent" in path

    def other(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if ":countTokens" in path:
            return 200, {"totalTokens": 100}
        return super().other(method, path, body)

    def frame(self, name: str | None, data: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(data).encode() + b"\r\n\r\n"

    def contents(self, index: int) -> list[dict[str, Any]]:
        """The conversation (`contents`) the CLI sent in its `index`-th model request."""
        body = self.model_requests[index].body
        return list(body["contents"]) if isinstance(body, dict) else []


def _chunk(parts: list[dict[str, Any]], finish: str | None = "STOP") -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    usage = {"promptTokenCount": 120, "candidatesTokenCount": 30, "totalTokenCount": 150}
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-2.5-pro"}


def text(message: str) -> Reply:
    """The model answers with text and stops."""
    return Reply(events=[(None, _chunk([{"text": message}]))])


def call(name: str, args: dict[str, Any]) -> Reply:
    """The model calls one tool (a `functionCall` part)."""
    return Reply(events=[(None, _chunk([{"functionCall": {"name": name, "args": args}}]))])


def error(status: int, message: str) -> Reply:
    """An HTTP error with the Gemini API's error body."""
    body = {"error": {"code": status, "message": message, "status": _STATUS.get(status, "")}}
    return Reply(status=status, body=body)


def hang() -> Reply:
    return Reply(hang=True)
