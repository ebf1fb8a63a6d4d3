"""A scripted OpenAI Responses API on 127.0.0.1, as Codex calls it through a custom model
provider (`base_url`, `wire_api = "responses"` in its config.toml): `POST <base>/responses`
answered with server-sent events (shapes: the OpenAI Responses API streaming reference).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from tests.fakes.scripted_api import Reply, ScriptedAPI

_ids = itertools.count(1)


class FakeOpenAIAPI(ScriptedAPI):
    def is_model_request(self, method: str, path: str) -> bool:
        return method == "POST" and path.split("?")[0].endswith("/responses")

    def other(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "GET" and path.split("?")[0].endswith("/models"):
            return 200, {"object": "list", "data": []}
        return super().other(method, path, body)

    def frame(self, name: str | None, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    @property
    def url(self) -> str:
        return f"{self.base}/v1"

    def inputs(self, index: int) -> list[dict[str, Any]]:
        """The conversation (`input` items) Codex sent in its `index`-th model request."""
        body = self.model_requests[index].body
        return list(body["input"]) if isinstance(body, dict) else []


def _response(items: list[dict[str, Any]]) -> Reply:
    rid = f"resp_{next(_ids)}"
    events: list[tuple[str | None, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": {"id": rid}})
    ]
    for index, item in enumerate(items):
        events.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": item},
            )
        )
    usage = {
        "input_tokens": 120,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 30,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 150,
    }
    completed = {"type": "response.completed", "response": {"id": rid, "usage": usage}}
    events.append(("response.completed", completed))
    return Reply(events=events)


def text(message: str) -> Reply:
    """The model answers with an assistant message and ends its turn."""
    item = {
        "type": "message",
        "role": "assistant",
        "id": f"msg_{next(_ids)}",
        "content": [{"type": "output_text", "text": message, "annotations": []}],
    }
    return _response([item])


def call(name: str, arguments: dict[str, Any]) -> Reply:
    """The model calls one function tool."""
    item = {
        "type": "function_call",
        "id": f"fc_{next(_ids)}",
        "call_id": f"call_{next(_ids)}",
        "name": name,
        "arguments": json.dumps(arguments),
    }
    return _response([item])


def custom_call(name: str, text_input: str) -> Reply:
    """The model calls a freeform tool (Codex's `apply_patch` is one)."""
    item = {
        "type": "custom_tool_call",
        "id": f"ctc_{next(_ids)}",
        "call_id": f"call_{next(_ids)}",
        "name": name,
        "input": text_input,
    }
    return _response([item])


def error(status: int, message: str, code: str | None = None) -> Reply:
    """An HTTP error with the OpenAI API's error body."""
    body = {"error": {"message": message, "type": code or "api_error", "code": code}}
    return Reply(status=status, body=body)


def hang() -> Reply:
    return Reply(hang=True)
