"""Gemini CLI `stream-json` lines (and its `--output-format json` object) as AgentEvents.

Shapes: Gemini CLI's headless-mode docs and tests/fixtures/transcripts/gemini-*.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from worker.agents.jsonl import (
    as_dict,
    as_int,
    as_str,
    invalid_line,
    message_of,
    parse,
    tool_call,
    tool_result,
)
from worker.models import AgentEvent, EventKind


def gemini_events(lines: Iterable[str]) -> Iterator[AgentEvent]:
    """Gemini's stream: assistant `message` deltas are joined into one TEXT event."""
    joiner = GeminiJoiner()
    for index, line in enumerate(lines):
        yield from joiner.feed(line, index)
    yield from joiner.flush()


class GeminiJoiner:
    """Gemini's stream read line by line (as a live run is). Assistant `message` deltas are
    joined into one TEXT event, given out when another line arrives or at `flush`."""

    def __init__(self) -> None:
        self._chunks: list[str] = []
        self._first = 0

    def feed(self, line: str, index: int) -> list[AgentEvent]:
        obj = parse(line)
        if obj is None:
            return []
        if (
            isinstance(obj, dict)
            and obj.get("type") == "message"
            and obj.get("role") == "assistant"
        ):
            if not self._chunks:
                self._first = index
            self._chunks.append(as_str(obj.get("content")) or "")
            return [] if obj.get("delta") else self.flush()
        events = self.flush()
        if isinstance(obj, str):
            events.append(invalid_line(line, index, obj))
        else:
            events.extend(gemini_object(obj, index))
        return events

    def flush(self) -> list[AgentEvent]:
        if not self._chunks:
            return []
        text = "".join(self._chunks)
        self._chunks = []
        return [AgentEvent(EventKind.TEXT, self._first, text=text, raw_type="message")]


def gemini_object(obj: dict[str, Any], index: int = 0) -> list[AgentEvent]:
    kind = obj.get("type")
    if kind == "init":
        return [
            AgentEvent(
                EventKind.SESSION,
                index,
                session_id=as_str(obj.get("session_id")),
                model=as_str(obj.get("model")),
                raw_type=kind,
            )
        ]
    if kind == "tool_use":
        tool, tool_id = as_str(obj.get("tool_name")), as_str(obj.get("tool_id"))
        return [tool_call(index, tool, tool_id, obj.get("parameters"), kind)]
    if kind == "tool_result":
        failed = obj.get("status") == "error"
        output = as_str(obj.get("output")) or ""
        error = (message_of(obj.get("error")) or output[:500]) if failed else None
        tool_id = as_str(obj.get("tool_id"))
        return [
            tool_result(index, tool_id, failed=failed, output=output, error=error, raw_type=kind)
        ]
    if kind == "error":
        # severity "warning" (a loop was detected, a hook blocked a call) or "error" (turn limit,
        # an empty or malformed model response): packages/core/src/output/types.ts.
        severity = as_str(obj.get("severity"))
        return [
            AgentEvent(
                EventKind.ERROR, index, error=message_of(obj), subtype=severity, raw_type=kind
            )
        ]
    if kind == "result":
        stats = as_dict(obj.get("stats"))
        return [
            AgentEvent(
                EventKind.RESULT,
                index,
                is_error=obj.get("status") == "error",
                error=message_of(obj.get("error")),
                subtype=as_str(obj.get("status")),
                input_tokens=as_int(stats.get("input_tokens")) or None,
                output_tokens=as_int(stats.get("output_tokens")) or None,
                raw_type=kind,
            )
        ]
    return [AgentEvent(EventKind.OTHER, index, raw_type=str(kind))]


def gemini_whole(obj: dict[str, Any]) -> list[AgentEvent]:
    """The `--output-format json` object: the response, and the prompt tokens it used."""
    events = []
    if isinstance(obj.get("response"), str):
        events.append(AgentEvent(EventKind.TEXT, 0, text=obj["response"], raw_type="response"))
    error = obj.get("error")
    stats = as_dict(obj.get("stats"))
    models = as_dict(stats.get("models"))
    prompt = sum(as_int(as_dict(as_dict(m).get("tokens")).get("prompt")) for m in models.values())
    events.append(
        AgentEvent(
            EventKind.RESULT,
            0,
            is_error=error is not None,
            error=message_of(error),
            input_tokens=prompt or None,
            raw_type="gemini/json",
        )
    )
    return events
