"""OpenHands and SWE-agent trajectories read as AgentEvents, for `worker inspect`.

Neither tool prints a stream while it works; both save what happened afterwards:

* **OpenHands** saves a list of events (`tests/runtime/trajs/*.json`, the `history` of each
  line of an evaluation or resolver `output.jsonl`). An action (`"action": "run"`, `"edit"`,
  `"read"`, ...) is a tool call, its observation (`"observation"`, `"cause"` = the action's
  `id`) the result; `"observation": "error"` or a non-zero `exit_code` is a failed result.
  Older resolver histories carry no ids: an observation answers the action before it.
* **mini-swe-agent** (SWE-agent's small sibling) saves `.traj.json`: `{"messages": [...],
  "info": {...}}` in the chat format, the command in an assistant message's `tool_calls` (or
  a ```bash block of its text) and the output in the next `tool` (or `user`) message, which
  opens with `<returncode>N</returncode>`. A user message without one is the harness
  rejecting the answer (a format error).
* **SWE-agent** saves a `.traj` file: `{"trajectory": [{"thought", "action",
  "observation", ...}], "info": {"exit_status", "model_stats"}}`. The first word of an
  action is its tool (`edit`, `open`, `python`, `submit`); SWE-agent records no exit code, so
  a result is a failure when its first line is one of SWE-agent's own error messages, a
  Python traceback or a shell's "command not found".

User messages of either tool (a harness's rejection, a user's correction) become
`EventKind.OTHER` events with `raw_type="user"`: the detectors count repeated ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from worker.models import AgentEvent, EventKind

# OpenHands events that are bookkeeping, not work (agent state, memory recall, the prompt).
_OH_QUIET = frozenset(
    {"change_agent_state", "agent_state_changed", "recall", "system", "null", "condensation"}
)
_OH_ARG_NOISE = ("thought", "is_confirmed", "security_risk", "action_risk", "keep_prompt")
# SWE-agent's own refusals and common shell failures, as the first line of an observation.
_SWE_ERROR = re.compile(
    r"(?i)^(your proposed edit has introduced new syntax error|traceback \(most recent call"
    r"|usage: |error: |no replacement was performed|no changes were made|.*: command not found"
    r"|.*no such file or directory|the command took too long|file .* not found"
    r"|invalid (?:command|arguments?))"
)


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


def sweagent_events(traj: dict[str, Any]) -> Iterator[AgentEvent]:
    """The events of a SWE-agent `.traj` object: thought, call and result per step."""
    steps = traj.get("trajectory")
    for index, step in enumerate(steps if isinstance(steps, list) else []):
        if not isinstance(step, dict):
            yield AgentEvent(EventKind.ERROR, index, error="not a step", raw_type="invalid")
            continue
        thought = step.get("thought") or ""
        if isinstance(thought, str) and thought.strip():
            yield AgentEvent(EventKind.TEXT, index, text=thought, raw_type="thought")
        action = str(step.get("action") or "").strip()
        tool = action.split(None, 1)[0] if action else "none"
        tool_id = f"swe-{index}"
        yield AgentEvent(
            EventKind.TOOL_CALL,
            index,
            tool=tool,
            tool_id=tool_id,
            args={"command": action},
            raw_type="action",
        )
        observation = str(step.get("observation") or "")
        first = observation.strip().split("\n", 1)[0]
        failed = bool(_SWE_ERROR.match(first))
        yield AgentEvent(
            EventKind.TOOL_RESULT,
            index,
            tool_id=tool_id,
            text=observation,
            is_error=failed,
            error=observation if failed else None,
            raw_type="observation",
        )
    info = traj.get("info")
    if isinstance(info, dict):
        stats = info.get("model_stats")
        cost = stats.get("instance_cost") if isinstance(stats, dict) else None
        yield AgentEvent(
            EventKind.RESULT,
            len(steps) if isinstance(steps, list) else 0,
            subtype=str(info.get("exit_status") or ""),
            cost_usd=float(cost) if isinstance(cost, int | float) else None,
            raw_type="info",
        )


_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")
_OUTPUT_TAGS = re.compile(r"</?(?:returncode|output)>(?:-?\d+</returncode>)?")
# mini-swe-agent 2 names its blocks ```mswea_bash_command; 1.x wrote ```bash.
_BASH_BLOCK = re.compile(r"```(?:bash|sh|mswea_bash_command)?\s*\n(.*?)\n```", re.S)


def mini_events(traj: dict[str, Any]) -> Iterator[AgentEvent]:
    """The events of a mini-swe-agent `.traj.json` object (chat messages)."""
    pending: str | None = None
    messages = traj.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(message, dict):
            continue
        role, text = message.get("role"), _chat_text(message.get("content"))
        if role == "assistant":
            if text.strip():
                yield AgentEvent(EventKind.TEXT, index, text=text, raw_type="assistant")
            calls = message.get("tool_calls") or []
            for call in calls if isinstance(calls, list) else []:
                yield _chat_call(call, index)
            block = None if calls else _BASH_BLOCK.search(text)
            if block is not None:
                pending = f"mini-{index}"
                yield AgentEvent(
                    EventKind.TOOL_CALL,
                    index,
                    tool="bash",
                    tool_id=pending,
                    args={"command": block.group(1)},
                    raw_type="assistant",
                )
        elif role == "tool" or (role == "user" and pending and _RETURNCODE.search(text[:200])):
            code, body = _observation(text)
            failed = code is not None and code != "0"
            tool_id = message.get("tool_call_id") if role == "tool" else pending
            pending = None
            yield AgentEvent(
                EventKind.TOOL_RESULT,
                index,
                tool_id=str(tool_id),
                text=body,
                is_error=failed,
                error=(body or f"exit code {code}") if failed else None,
                raw_type=str(role),
            )
        elif role == "user" and index > 1:
            yield AgentEvent(EventKind.OTHER, index, text=text, raw_type="user")
        elif role == "exit":
            yield AgentEvent(EventKind.RESULT, index, text=text, raw_type="exit")


def _observation(text: str) -> tuple[str | None, str]:
    """A command's return code and output: `<returncode>N</returncode><output>...` as
    mini-swe-agent writes it, or the JSON object (`returncode`, `output` or its head and
    tail) of its 2.0 pre-releases' tool-call template."""
    if text.lstrip().startswith("{"):
        try:
            obj = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("returncode"), int):
            parts = [obj.get(key) for key in ("output", "output_head", "output_tail")]
            body = "\n".join(part for part in parts if isinstance(part, str))
            return str(obj["returncode"]), body.strip()
    code = _RETURNCODE.search(text[:200])
    return (code.group(1) if code else None), _OUTPUT_TAGS.sub("", text).strip()


def _chat_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def _chat_call(call: Any, index: int) -> AgentEvent:
    function = call.get("function") if isinstance(call, dict) else None
    function = function if isinstance(function, dict) else {}
    raw = function.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        args = {"arguments": raw}
    return AgentEvent(
        EventKind.TOOL_CALL,
        index,
        tool=str(function.get("name") or "unknown"),
        tool_id=str(call.get("id")) if isinstance(call, dict) else None,
        args=args if isinstance(args, dict) else {"arguments": args},
        raw_type="assistant",
    )


def looks_like_mini(obj: Any) -> bool:
    """A mini-swe-agent trajectory: chat `messages` and a `mini-swe-agent` format tag or info."""
    if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
        return False
    tag = str(obj.get("trajectory_format") or "")
    return tag.startswith("mini-swe-agent") or isinstance(obj.get("info"), dict)


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


def looks_like_sweagent(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("trajectory"), list)
