"""Small helpers for reading JSON lines of agent CLIs into AgentEvents: tolerant, never raising.

The events every CLI has (a line that is not JSON, a tool call, its result) are built here, so
that their caps are the same whichever agent ran.
"""

from __future__ import annotations

import json
from typing import Any

from worker.models import AgentEvent, EventKind

# Read once: on Python 3.11 `EventKind.X` goes through EnumType.__getattr__, ten times the
# cost of a global, and every tool call and result of a stream is built here.
_TOOL_CALL, _TOOL_RESULT = EventKind.TOOL_CALL, EventKind.TOOL_RESULT
# AgentEvent's fields from input_tokens to resets_at, which a tool call or result leaves unset.
_NO_USAGE = (None,) * 7
# json.loads wraps the decoder in a type check and two whitespace matches, 40% of the time of
# a typical stream line; a stripped line needs neither.
_RAW_DECODE = json.JSONDecoder().raw_decode


def loads(line: str) -> Any:
    """`json.loads(line)` of a line with no surrounding whitespace: the same value, or the
    same JSONDecodeError (a line the decoder does not take whole goes through json.loads)."""
    try:
        value, end = _RAW_DECODE(line)
    except ValueError:
        return json.loads(line)
    return value if end == len(line) else json.loads(line)


def parse(line: str) -> dict[str, Any] | str | None:
    """A line's JSON object; None for a blank line; the problem's text when it is not one."""
    line = line.strip()
    if not line:
        return None
    try:
        obj = loads(line)
    except json.JSONDecodeError as exc:
        return f"not JSON: {exc.msg}"
    return obj if isinstance(obj, dict) else "not a JSON object"


def message_of(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return as_str(value.get("message")) or json.dumps(value)[:500]
    return str(value)[:500]


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def invalid_line(line: str, index: int, problem: str) -> AgentEvent:
    """The ERROR event for a line that is not a JSON object (`problem` says why)."""
    return AgentEvent(EventKind.ERROR, index, text=line[:500], error=problem, raw_type="invalid")


def tool_call(
    index: int, tool: str | None, tool_id: str | None, args: Any, raw_type: str
) -> AgentEvent:
    """A tool call; arguments that are not a JSON object are left out."""
    # By position, in AgentEvent's field order: half the time of a keyword call, and every
    # tool call of a stream is built here.
    head = (_TOOL_CALL, index, None, None, None, tool, tool_id, as_dict(args), False, None)
    return AgentEvent._make((*head, *_NO_USAGE, raw_type))


def tool_result(
    index: int,
    tool_id: str | None,
    *,
    failed: bool,
    output: str,
    error: str | None,
    raw_type: str,
) -> AgentEvent:
    """A tool's result: its output (capped), and its error when it failed."""
    head = (_TOOL_RESULT, index, None, None, output[:2000], None, tool_id, None, failed, error)
    return AgentEvent._make((*head, *_NO_USAGE, raw_type))  # by position, as in tool_call
