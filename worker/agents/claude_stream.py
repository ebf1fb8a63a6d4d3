"""Pure normalisation of Claude Code's stream-json (and session-log) lines into AgentEvents.

Unknown event types and subtypes (hooks, status, partial deltas, file snapshots) become
`OTHER` events; a line that is not JSON becomes an `ERROR` event naming the problem. Nothing
here raises on bad input: a stream is evidence, and one bad line must not hide the rest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from worker.agents.jsonl import as_int, as_str, loads, new_event
from worker.models import AgentEvent, EventKind, InfraFailure, InfraKind

# The CLI's usage-limit text: "You've hit your limit · resets 1pm (Europe/Paris)".
USAGE_LIMIT_TEXT = re.compile(r"(?i)(hit your (usage )?limit|usage limit reached)")
SESSION_MISSING_TEXT = re.compile(r"(?i)no conversation found with session id")
# The CLI's words for a bad key: "Invalid API key · Fix external API key" (2.1.x).
# An account out of credit (HTTP 400, "Credit balance is too low"): the operator's to fix too.
CREDIT_TEXT = re.compile(r"(?i)credit balance is too low")
AUTH_TEXT = re.compile(
    r"(?i)(invalid api key|authentication_(failed|error)|please run /login"
    r"|credit balance is too low)"
)
AUTH_ERRORS = frozenset({"authentication_failed", "authentication_error", "permission_error"})
KEY_SETTING = "ANTHROPIC_API_KEY"
# The model of the messages the CLI writes itself in the model's place: "You've hit your
# limit", "API Error: 529 ...". Their TEXT events carry it, so that the supervisor can tell
# them from the model's words.
SYNTHETIC_MODEL = "<synthetic>"
CLI = "Claude Code"
# Read once: on Python 3.11 `EventKind.X` goes through EnumType.__getattr__, ten times the
# cost of a global, and a message's events are built for every line of a stream.
_TEXT, _TOOL_CALL, _TOOL_RESULT = EventKind.TEXT, EventKind.TOOL_CALL, EventKind.TOOL_RESULT
_USAGE = EventKind.USAGE


def normalise_line(line: str, index: int = 0) -> list[AgentEvent]:
    line = line.strip()
    if not line:
        return []
    try:
        obj = loads(line)
    except json.JSONDecodeError as exc:
        return [
            AgentEvent(
                EventKind.ERROR,
                index,
                text=line[:500],
                error=f"not JSON: {exc.msg}",
                raw_type="invalid",
            )
        ]
    if not isinstance(obj, dict):
        return [AgentEvent(EventKind.ERROR, index, error="not a JSON object", raw_type="invalid")]
    return normalise_object(obj, index)


def normalise_object(obj: dict[str, Any], index: int = 0) -> list[AgentEvent]:
    kind = obj.get("type")
    if kind == "assistant":  # the lines of a stream, most of them first
        return _message_events(obj, index, kind)
    if kind == "user":
        events = _message_events(obj, index, kind)
        # A tool result is usually the last event: any() only when it is not.
        if not (events and events[-1].kind is _TOOL_RESULT) and not any(
            e.kind is _TOOL_RESULT for e in events
        ):
            # Plain user text: a harness's rejection or a user's correction. The run has no
            # use for it, but the supervisor counts the same one coming back again and again.
            text = _user_text(obj.get("message"))
            if text:
                events.append(AgentEvent(EventKind.OTHER, index, text=text, raw_type=kind))
        return events
    if kind == "system":
        if obj.get("subtype") == "init":
            return [
                AgentEvent(
                    EventKind.SESSION,
                    index,
                    session_id=as_str(obj.get("session_id")),
                    model=as_str(obj.get("model")),
                    raw_type="system/init",
                )
            ]
        return [
            AgentEvent(
                EventKind.OTHER, index, subtype=as_str(obj.get("subtype")), raw_type="system"
            )
        ]
    if kind == "rate_limit_event":
        info = obj.get("rate_limit_info") or {}
        if not isinstance(info, dict):
            info = {}
        resets = info.get("resetsAt")
        return [
            AgentEvent(
                EventKind.RATE_LIMIT,
                index,
                status=as_str(info.get("status")),
                resets_at=float(resets) if isinstance(resets, int | float) else None,
                subtype=as_str(info.get("rateLimitType")),
                raw_type=kind,
            )
        ]
    if kind == "result":
        raw_usage = obj.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        cost = obj.get("total_cost_usd")
        turns = obj.get("num_turns")
        return [
            AgentEvent(
                EventKind.RESULT,
                index,
                session_id=as_str(obj.get("session_id")),
                text=as_str(obj.get("result")) or "",
                is_error=bool(obj.get("is_error")),
                subtype=as_str(obj.get("subtype")),
                cost_usd=float(cost) if isinstance(cost, int | float) else None,
                num_turns=turns if isinstance(turns, int) else None,
                input_tokens=_context_tokens(usage),
                output_tokens=as_int(usage.get("output_tokens")),
                raw_type=kind,
            )
        ]
    # Partial deltas (`stream_event`), the session log's `file-history-snapshot`, `summary`
    # and `queue-operation` lines, and any type to come.
    return [AgentEvent(EventKind.OTHER, index, raw_type=str(kind))]


def infra_failure(obj: dict[str, Any]) -> InfraFailure | None:
    """What a `system/api_retry` event or an error `result` says about the infrastructure.

    Retries carry `error_status` (HTTP) and `error` (`authentication_failed`, `overloaded`,
    `server_error`, ...); a result that gave up carries `api_error_status`, `api_error_type`,
    `terminal_reason: "api_error"` and the CLI's words in `result`. A 400 (a request the API
    refused, e.g. a prompt too long) and a usage limit are not classified here.
    """
    kind = obj.get("type")
    if kind == "system" and obj.get("subtype") == "api_retry":
        status, error, words = obj.get("error_status"), as_str(obj.get("error")), ""
    elif kind == "result" and obj.get("is_error"):
        status, error = obj.get("api_error_status"), as_str(obj.get("api_error_type"))
        words = as_str(obj.get("result")) or ""
        if USAGE_LIMIT_TEXT.search(words):
            return None
        if status is None and error is None and obj.get("terminal_reason") != "api_error":
            return auth_failure(words, None) if AUTH_TEXT.search(words) else None
    else:
        return None
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    if status in (401, 403) or error in AUTH_ERRORS or AUTH_TEXT.search(words):
        return auth_failure(words or f"the API answered {error or 'authentication failed'}", status)
    if status is not None and status < 500 and status not in (408, 409, 429):
        return None
    what = f"HTTP {status}" if status is not None else "no answer"
    detail = words or error or "connection error"
    return InfraFailure(
        InfraKind.UNAVAILABLE,
        f"{CLI} could not reach the model API: {detail} ({what})",
        http_status=status,
    )


def auth_failure(words: str, status: int | None) -> InfraFailure:
    suffix = f" (HTTP {status})" if status is not None else ""
    return InfraFailure(
        InfraKind.AUTH,
        f"{CLI} {'has no credit left' if CREDIT_TEXT.search(words) else 'could not authenticate'}"
        f": {words}{suffix}",
        http_status=status,
        setting=KEY_SETTING,
    )


def normalise_lines(lines: Iterable[str]) -> Iterator[AgentEvent]:
    for index, line in enumerate(lines):
        yield from normalise_line(line, index)


def _user_text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    blocks = content if isinstance(content, list) else []
    parts = [
        str(block.get("text", ""))
        for block in blocks
        if isinstance(block, dict) and block.get("type") == "text"
    ]
    return "\n".join(parts)


def _message_events(obj: dict[str, Any], index: int, role: str) -> list[AgentEvent]:
    message = obj.get("message")
    if not isinstance(message, dict):
        return [AgentEvent(EventKind.OTHER, index, raw_type=role)]
    content = message.get("content")
    if isinstance(content, str):
        return [_text_event(message, index, content)] if role == "assistant" and content else []
    events: list[AgentEvent] = []
    assistant = role == "assistant"
    # The events are built by position (jsonl.new_event: AgentEvent's fields in order), the
    # builders of jsonl inlined: a Python call per event cost a third of building it.
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype == "tool_use":
            tool, tool_id, args = block.get("name"), block.get("id"), block.get("input")
            tool = tool if isinstance(tool, str) else None  # as_str, inlined (as below)
            tool_id = tool_id if isinstance(tool_id, str) else None
            args = args if isinstance(args, dict) else {}
            # fmt: off
            events.append(new_event((  # jsonl.tool_call
                _TOOL_CALL, index, None, None, None, tool, tool_id, args, False, None,
                None, None, None, None, None, None, None, role,
            )))
            # fmt: on
        elif btype == "tool_result":
            failed = bool(block.get("is_error"))
            text = block.get("content")
            text = text if isinstance(text, str) else _content_text(text)
            tool_id = block.get("tool_use_id")
            tool_id = tool_id if isinstance(tool_id, str) else None
            error = text[:500] if failed else None
            # fmt: off
            events.append(new_event((  # jsonl.tool_result
                _TOOL_RESULT, index, None, None, text[:2000], None, tool_id, None, failed, error,
                None, None, None, None, None, None, None, role,
            )))
            # fmt: on
        elif btype == "text" and assistant:
            events.append(_text_event(message, index, str(block.get("text", ""))))
    usage = message.get("usage")
    if assistant and isinstance(usage, dict):
        model, output = message.get("model"), usage.get("output_tokens")
        model = model if isinstance(model, str) else None
        output = output if output.__class__ is int else as_int(output)
        fresh = usage.get("input_tokens", 0)
        written = usage.get("cache_creation_input_tokens", 0)
        read = usage.get("cache_read_input_tokens", 0)
        if fresh.__class__ is written.__class__ is read.__class__ is int:
            tokens = fresh + written + read  # _context_tokens' common case, inlined
        else:
            tokens = _context_tokens(usage)
        # fmt: off
        events.append(new_event((  # jsonl.usage_event
            _USAGE, index, None, model, None, None, None, None, False, None,
            tokens, output, None, None, None, None, None, role,
        )))
        # fmt: on
    return events


def _text_event(message: dict[str, Any], index: int, text: str) -> AgentEvent:
    """An assistant text; the model named only on the CLI's own messages (SYNTHETIC_MODEL)."""
    model = SYNTHETIC_MODEL if message.get("model") == SYNTHETIC_MODEL else None
    return AgentEvent(_TEXT, index, model=model, text=text, raw_type="assistant")


def _context_tokens(usage: dict[str, Any]) -> int:
    """The prompt size of a turn: fresh input plus cache writes plus cache reads."""
    fresh = usage.get("input_tokens", 0)
    written = usage.get("cache_creation_input_tokens", 0)
    read = usage.get("cache_read_input_tokens", 0)
    if fresh.__class__ is written.__class__ is read.__class__ is int:
        return fresh + written + read  # the common case, without three calls of as_int
    return as_int(fresh) + as_int(written) + as_int(read)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)
