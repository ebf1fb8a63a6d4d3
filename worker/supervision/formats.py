"""Recorded transcripts of any agent CLI, read as AgentEvents for `worker inspect`.

Each CLI's lines go through its adapter's own normaliser (worker/agents/claude_stream.py,
codex_stream.py, gemini_stream.py), so a recording reads as the live run did. The format is told
per file from its event types. A file that is one pretty-printed JSON object (`--output-format
json` of Claude or Gemini) is read whole. Like the adapters, nothing here raises on a bad line:
it becomes an ERROR event.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from worker.agents.claude_stream import normalise_object
from worker.agents.codex_stream import codex_object
from worker.agents.gemini_stream import gemini_events, gemini_whole
from worker.agents.jsonl import parse
from worker.models import AgentEvent, EventKind

FORMATS = ("claude", "codex", "gemini")
_SIGNS = {
    "codex": {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
    },
    "gemini": {"init", "tool_use", "tool_result", "message"},
    "claude": {
        "system",
        "assistant",
        "user",
        "rate_limit_event",
        "stream_event",
        "file-history-snapshot",
        "summary",
        "queue-operation",
    },
}
_SAMPLE = 50  # lines looked at to tell the format


def detect_format(lines: Iterable[str]) -> str:
    """claude, codex or gemini: the one whose event types the first lines use most."""
    score = dict.fromkeys(FORMATS, 0)
    for count, line in enumerate(lines):
        if count >= _SAMPLE:
            break
        obj = parse(line)
        if isinstance(obj, dict):
            kind = obj.get("type")
            for fmt, signs in _SIGNS.items():
                score[fmt] += kind in signs
    best = max(FORMATS, key=lambda fmt: score[fmt])
    return best if score[best] else "claude"


def read_text(text: str, fmt: str = "auto") -> tuple[str, Iterator[AgentEvent]]:
    """The format of a transcript's text and its events (lazily, in order)."""
    lines = text.splitlines()
    whole = _single_object(text, lines)
    if whole is not None:
        if whole.get("type") == "result":  # claude --output-format json
            return "claude", iter(normalise_object(whole, 0))
        return _whole_format(whole, fmt), iter(gemini_whole(whole))
    if fmt == "auto":
        fmt = detect_format(lines)
    if fmt == "codex":
        return fmt, _events(lines, codex_object)
    if fmt == "gemini":
        return fmt, gemini_events(lines)
    return "claude", _events(lines, normalise_object)


def _single_object(text: str, lines: list[str]) -> dict[str, Any] | None:
    """A pretty-printed JSON object (its first line is not a whole object by itself)."""
    if len(lines) < 2 or not text.lstrip().startswith("{") or isinstance(parse(lines[0]), dict):
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _whole_format(obj: dict[str, Any], fmt: str) -> str:
    if fmt != "auto":
        return fmt
    return "gemini" if "response" in obj or "stats" in obj else "claude"


def _events(lines: list[str], normalise: Any) -> Iterator[AgentEvent]:
    for index, line in enumerate(lines):
        obj = parse(line)
        if obj is None:
            continue
        if isinstance(obj, str):
            yield AgentEvent(EventKind.ERROR, index, text=line[:500], error=obj, raw_type="invalid")
            continue
        yield from normalise(obj, index)
