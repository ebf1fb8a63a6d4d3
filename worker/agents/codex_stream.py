"""Codex `exec --json` lines as AgentEvents (shapes: Codex's `exec --json` docs and the
recorded transcripts in tests/fixtures/transcripts/). Tool items become a call and its result when
they complete; `item.started` is left out so that a call is never counted twice.
"""

from __future__ import annotations

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


def codex_object(obj: dict[str, Any], index: int = 0) -> list[AgentEvent]:
    """One Codex event. Tool items become a call and its result when they complete."""
    kind = obj.get("type")
    if kind == "thread.started":
        return [
            AgentEvent(
                EventKind.SESSION, index, session_id=as_str(obj.get("thread_id")), raw_type=kind
            )
        ]
    if kind == "item.completed" and isinstance(obj.get("item"), dict):
        return _codex_item(obj["item"], index)
    if kind in ("turn.completed", "turn.failed"):
        usage = as_dict(obj.get("usage"))
        # The usage of turn.completed adds up the turn's requests: a total, not the context
        # size, so it is a RESULT and never feeds the context-fill detector.
        return [
            AgentEvent(
                EventKind.RESULT,
                index,
                is_error=kind == "turn.failed",
                error=message_of(obj.get("error")),
                subtype=kind,
                input_tokens=as_int(usage.get("input_tokens")) or None,
                output_tokens=as_int(usage.get("output_tokens")) or None,
                raw_type=kind,
            )
        ]
    if kind == "error":
        return [AgentEvent(EventKind.ERROR, index, error=message_of(obj), raw_type=kind)]
    return [AgentEvent(EventKind.OTHER, index, raw_type=str(kind))]


def _codex_item(item: dict[str, Any], index: int) -> list[AgentEvent]:
    itype = item.get("type")
    item_id = as_str(item.get("id"))
    if itype == "agent_message":
        return [
            AgentEvent(EventKind.TEXT, index, text=as_str(item.get("text")) or "", raw_type=itype)
        ]
    if itype == "error":
        return [AgentEvent(EventKind.ERROR, index, error=message_of(item), raw_type="item/error")]
    if itype == "command_execution":
        tool, args = "command_execution", {"command": item.get("command")}
        code = item.get("exit_code")
        failed = item.get("status") == "failed" or (isinstance(code, int) and code != 0)
        output = as_str(item.get("aggregated_output")) or ""
        error = f"Exit code {code}\n{output[-400:]}" if failed else None
    elif itype == "file_change":
        tool, args = "file_change", {"changes": item.get("changes")}
        failed, output, error = item.get("status") == "failed", "", None
        error = "patch failed" if failed else None
    elif itype == "mcp_tool_call":
        tool = f"mcp__{item.get('server')}__{item.get('tool')}"
        raw = item.get("arguments")
        args = raw if isinstance(raw, dict) else {"arguments": raw}
        failed = item.get("status") == "failed" or item.get("error") is not None
        output, error = "", message_of(item.get("error")) if failed else None
    elif itype == "web_search":
        tool, args = "web_search", {"query": item.get("query")}
        failed, output, error = False, "", None
    else:
        return [AgentEvent(EventKind.OTHER, index, raw_type=f"item/{itype}")]
    return [
        tool_call(index, tool, item_id, args, str(itype)),
        tool_result(index, item_id, failed=failed, output=output, error=error, raw_type=str(itype)),
    ]


def codex_line(line: str, index: int = 0) -> list[AgentEvent]:
    """One line of `codex exec --json`; a line that is not a JSON object is an ERROR event."""
    obj = parse(line)
    if obj is None:
        return []
    if isinstance(obj, str):
        return [invalid_line(line, index, obj)]
    return codex_object(obj, index)
