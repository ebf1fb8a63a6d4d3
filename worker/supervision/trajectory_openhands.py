"""OpenHands trajectories read as AgentEvents, for `worker inspect` (trajectories.py says how
each tool saves what happened; it re-exports these names).

OpenHands saves a list of events: V0 events name an `action` (a tool call) or an
`observation` (its result, `cause` = the action's `id`; older resolver histories carry no ids,
and an observation answers the action before it); the agent SDK's V1 events name their
`kind` (`ActionEvent`, `ObservationEvent`, ...). A history may mix the two.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from worker.models import AgentEvent, EventKind

# OpenHands events that are bookkeeping, not work (agent state, memory recall, the prompt).
_OH_QUIET = frozenset(
    {"change_agent_state", "agent_state_changed", "recall", "system", "null", "condensation"}
)
_OH_ARG_NOISE = ("thought", "is_confirmed", "security_risk", "action_risk", "keep_prompt")


def openhands_events(history: list[Any]) -> Iterator[AgentEvent]:
    """The events of one OpenHands history (a list of event dicts), in order: the V0 events
    (`action`/`observation` names) and the agent SDK's V1 events (`kind`: `ActionEvent`,
    `ObservationEvent`, ...), even mixed. An event of a shape neither has becomes an ERROR
    event naming it, and the replay goes on."""
    pending: str | None = None  # id of the last action, for histories without ids
    known = 0
    for index, item in enumerate(history):
        if not isinstance(item, dict):
            yield AgentEvent(EventKind.ERROR, index, error="not an event", raw_type="invalid")
            continue
        if _v1_kind(item) is not None:
            known += 1
            yield from _v1_events(item, index)
            continue
        action, observation = item.get("action"), item.get("observation")
        if not isinstance(action, str | None) or not isinstance(observation, str | None):
            yield AgentEvent(EventKind.ERROR, index, error=_odd(item), raw_type="invalid")
            continue
        known += action is not None or observation is not None
        if observation is not None and action is None:
            if observation in _OH_QUIET:
                yield AgentEvent(EventKind.OTHER, index, raw_type=str(observation))
                continue
            cause = item.get("cause")
            yield _oh_result(item, index, str(cause) if cause is not None else pending)
            pending = None
        elif action is not None:
            tool_id = str(item.get("id", f"oh-{index}"))
            event = _oh_action(item, index, tool_id)
            if event.kind is EventKind.TOOL_CALL:
                pending = tool_id
            yield from _thought(item, index)
            yield event
        else:
            yield AgentEvent(EventKind.OTHER, index, raw_type="unknown")
    if history and not known:
        raise ValueError(
            "no event of a shape OpenHands writes (V0 actions and observations, V1 kinds)"
        )


# The agent SDK's (V1) event kinds that are bookkeeping, not work.
_V1_QUIET = frozenset(
    {
        "SystemPromptEvent",
        "ConversationStateUpdateEvent",
        "Condensation",
        "CondensationRequest",
        "CondensationSummaryEvent",
        "PauseEvent",
        "TokenEvent",
        "LLMCompletionLogEvent",
    }
)
_V1_KINDS = _V1_QUIET | {
    "ActionEvent",
    "ObservationEvent",
    "MessageEvent",
    "AgentErrorEvent",
    "UserRejectObservation",
}


def _v1_kind(item: dict[str, Any]) -> str | None:
    """The V1 kind of an event (`kind`, or `event` in a condensed log), None for a V0 one."""
    kind = item.get("kind", item.get("event"))
    return kind if isinstance(kind, str) and kind in _V1_KINDS else None


def looks_like_v1(item: Any) -> bool:
    return isinstance(item, dict) and _v1_kind(item) is not None


def _v1_events(item: dict[str, Any], index: int) -> Iterator[AgentEvent]:
    kind = _v1_kind(item)
    if kind == "ActionEvent":
        yield from _v1_action(item, index)
    elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
        yield _v1_result(item, index, str(kind))
    elif kind == "MessageEvent":
        message = item.get("llm_message")
        message = message if isinstance(message, dict) else item
        text = _parts_text(message.get("content"))
        if item.get("source") == "user" or message.get("role") == "user":
            yield AgentEvent(EventKind.OTHER, index, text=text, raw_type="user")
        elif text.strip():
            yield AgentEvent(EventKind.TEXT, index, text=text, raw_type="message")
    else:
        yield AgentEvent(EventKind.OTHER, index, raw_type=str(kind))


def _v1_action(item: dict[str, Any], index: int) -> Iterator[AgentEvent]:
    thought = _parts_text(item.get("thought")) or _parts_text(item.get("reasoning_content"))
    if thought.strip():
        yield AgentEvent(EventKind.TEXT, index, text=thought, raw_type="thought")
    action = item.get("action")
    raw_call = item.get("tool_call")
    call: dict[str, Any] = raw_call if isinstance(raw_call, dict) else {}
    tool = str(item.get("tool_name") or call.get("name") or "unknown")
    tool_id = item.get("tool_call_id") or call.get("id") or item.get("id") or f"oh-{index}"
    if isinstance(action, dict):
        args = {k: v for k, v in action.items() if k != "kind" and k not in _OH_ARG_NOISE}
    else:
        args = _call_args(call.get("arguments"))
    if tool == "finish":
        yield AgentEvent(
            EventKind.RESULT, index, text=str(args.get("message") or ""), raw_type="finish"
        )
        return
    yield AgentEvent(
        EventKind.TOOL_CALL,
        index,
        tool=tool,
        tool_id=str(tool_id),
        args=args,
        raw_type="ActionEvent",
    )


def _v1_result(item: dict[str, Any], index: int, kind: str) -> AgentEvent:
    observation = item.get("observation")
    if isinstance(observation, dict):
        text = _parts_text(observation.get("content"))
        code = _exit_code(observation)
        failed = observation.get("is_error") is True or (code is not None and code != 0)
    else:  # an agent error (a bad tool call), a user's rejection
        text = str(item.get("error") or item.get("rejection_reason") or observation or "")
        failed = True
    if kind == "UserRejectObservation":
        text = f"rejected by the user: {text}"
    return AgentEvent(
        EventKind.TOOL_RESULT,
        index,
        tool_id=str(item.get("tool_call_id") or item.get("action_id") or ""),
        text=text,
        is_error=failed,
        error=(text or f"{kind} failed") if failed else None,
        raw_type=kind,
    )


def _parts_text(content: Any) -> str:
    """A V1 content: a string, or a list of parts of which the text ones count."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return ""


def _call_args(raw: Any) -> dict[str, Any]:
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        args = {"arguments": raw}
    return args if isinstance(args, dict) else {"arguments": args}


def _odd(item: dict[str, Any]) -> str:
    """What an event of a shape no reader knows looks like: its keys, no values."""
    return "an event of an unknown shape, keys " + ", ".join(sorted(map(str, item))[:10])


def _thought(item: dict[str, Any], index: int) -> Iterator[AgentEvent]:
    args = item.get("args")
    thought = args.get("thought") if isinstance(args, dict) else item.get("thought")
    if isinstance(thought, str) and thought.strip():
        yield AgentEvent(EventKind.TEXT, index, text=thought, raw_type="thought")


def _oh_action(item: dict[str, Any], index: int, tool_id: str) -> AgentEvent:
    action = str(item["action"])
    source = item.get("source", "agent")
    raw_args = item.get("args")
    args = raw_args if isinstance(raw_args, dict) else dict(item)  # older: args at top level
    text = args.get("content") or item.get("message") or ""
    if action in _OH_QUIET:
        return AgentEvent(EventKind.OTHER, index, raw_type=action)
    if action == "message":
        if source == "user":
            return AgentEvent(EventKind.OTHER, index, text=str(text), raw_type="user")
        return AgentEvent(EventKind.TEXT, index, text=str(text), raw_type="message")
    if action == "finish":
        return AgentEvent(EventKind.RESULT, index, text=str(text), raw_type="finish")
    meta = item.get("tool_call_metadata")
    tool = meta.get("function_name") if isinstance(meta, dict) else None
    clean = {k: v for k, v in args.items() if k not in _OH_ARG_NOISE and k != "action"}
    return AgentEvent(
        EventKind.TOOL_CALL,
        index,
        tool=str(tool or action),
        tool_id=tool_id,
        args=clean,
        raw_type=action,
    )


def _oh_result(item: dict[str, Any], index: int, cause: str | None) -> AgentEvent:
    observation = str(item.get("observation"))
    content = item.get("content")
    text = content if isinstance(content, str) else str(item.get("message") or "")
    extras = item.get("extras") if isinstance(item.get("extras"), dict) else item
    code = _exit_code(extras)
    failed = observation == "error" or (code is not None and code != 0)
    return AgentEvent(
        EventKind.TOOL_RESULT,
        index,
        tool_id=cause,
        text=text,
        is_error=failed,
        error=text if failed else None,
        raw_type=observation,
    )


def _exit_code(extras: Any) -> int | None:
    code = extras.get("exit_code")
    meta = extras.get("metadata")
    if code is None and isinstance(meta, dict):
        code = meta.get("exit_code")
    return code if isinstance(code, int) else None


def looks_like_openhands(obj: Any) -> bool:
    """A list of OpenHands events (V0 or the agent SDK's V1), or an object carrying one as
    `history` (an evaluation's output.jsonl record) or `events`."""
    if isinstance(obj, dict):
        obj = obj.get("history", obj.get("events"))
    if not isinstance(obj, list) or not obj:
        return False
    head = [item for item in obj[:20] if isinstance(item, dict)]
    return bool(head) and all(
        "action" in item or "observation" in item or _v1_kind(item) is not None for item in head
    )
