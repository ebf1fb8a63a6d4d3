"""SWE-agent's `.traj` and mini-swe-agent's `.traj.json` read as AgentEvents, for `worker
inspect` (trajectories.py says how each tool saves what happened; it re-exports these names).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from worker.models import AgentEvent, EventKind

# SWE-agent's own refusals and common shell failures, as the first line of an observation.
_SWE_ERROR = re.compile(
    r"(?i)^(your proposed edit has introduced new syntax error|traceback \(most recent call"
    r"|usage: |error: |no replacement was performed|no changes were made|.*: command not found"
    r"|.*no such file or directory|the command took too long|file .* not found"
    r"|invalid (?:command|arguments?))"
)


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


def looks_like_sweagent(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("trajectory"), list)
