"""Recorded transcripts of any agent CLI, read as AgentEvents for `worker inspect`.

Each CLI's lines go through its adapter's own normaliser (worker/agents/claude_stream.py,
codex_stream.py, gemini_stream.py), so a recording reads as the live run did; OpenHands and
SWE-agent trajectories go through trajectories.py. The format is told from the content. A file
that is one JSON document (`--output-format json` of Claude or Gemini, a `.traj`, an OpenHands
event list) is read whole. A file that is no known format is an error (exit 65), and so is a
`--format` the content contradicts; within a known format a bad line becomes an ERROR event.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from functools import partial
from itertools import chain
from typing import IO, Any

from worker.agents.claude_stream import normalise_object
from worker.agents.codex_stream import codex_object
from worker.agents.gemini_stream import gemini_events, gemini_whole
from worker.agents.jsonl import Normaliser, each_line, lines_of, parse
from worker.errors import ExitCode, MalformedInput
from worker.models import AgentEvent, EventKind
from worker.supervision.trajectories import (
    looks_like_mini,
    looks_like_openhands,
    looks_like_sweagent,
    looks_like_v1,
    mini_events,
    openhands_events,
    sweagent_events,
)

FORMATS = ("claude", "codex", "gemini", "openhands", "sweagent")
_EXPECTED = (
    "Claude Code stream-json or session JSON lines, Codex `exec --json` lines, Gemini CLI "
    "stream-json or JSON, an OpenHands trajectory or output.jsonl, or a SWE-agent .traj "
    "(or mini-swe-agent .traj.json)"
)
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
# Characters read at a time where a transcript is read as it comes (see read_file): a piece
# is decoded while it is still in the cache, and the memory of the last one is used again.
_PIECE = 1 << 20
# The formats of JSON lines read as they come: their lines go through _text_events.
_LINES: dict[str, Normaliser] = {"claude": normalise_object, "codex": codex_object}


class UnreadableTranscript(MalformedInput):
    """The file is no transcript format worker knows, or not the one `--format` named."""

    exit_code = ExitCode.DATA


def detect_format(lines: Iterable[str]) -> str | None:
    """claude, codex, gemini or openhands: the one the first lines' events belong to, or None."""
    score = dict.fromkeys(_SIGNS, 0)
    openhands = 0
    for count, line in enumerate(lines):
        if count >= _SAMPLE:
            break
        obj = parse(line)
        if isinstance(obj, dict):
            # OpenCode-style streams (link-assistant/agent) share Gemini's `tool_use` and
            # `text` type names but nest the payload under `part`: no format worker reads.
            kind = obj.get("type") if "part" not in obj else None
            for fmt, signs in _SIGNS.items():
                score[fmt] += kind in signs
            openhands += (
                "action" in obj
                or "observation" in obj
                or looks_like_v1(obj)
                or looks_like_openhands(obj)
            )
    best = max(score, key=lambda fmt: score[fmt])
    if score[best]:
        return best
    return "openhands" if openhands else None


def read_text(text: str, fmt: str = "auto") -> tuple[str, Iterator[AgentEvent]]:
    """The format of a transcript's text and its events (lazily, in order).

    Raises UnreadableTranscript when the content is none of FORMATS, or is not the `fmt` asked
    for: a transcript read in the wrong format would replay as "nothing happened".
    """
    whole = _whole_document(text)
    found = _whole_format(whole) if whole is not None else None
    if found is None:
        found = detect_format(_head(text, _SAMPLE))
    if found is None:
        raise UnreadableTranscript(f"not a transcript worker can read: expected {_EXPECTED}")
    if fmt not in ("auto", found):
        raise UnreadableTranscript(
            f"this is a {found} transcript, not {fmt}: use --format {found} (or auto)"
        )
    if whole is not None and found in ("claude", "gemini", "sweagent") and not _is_line(whole):
        if found == "claude":
            return found, iter(normalise_object(whole, 0))
        if found == "gemini":
            return found, iter(gemini_whole(whole))
        return found, sweagent_events(whole) if "trajectory" in whole else mini_events(whole)
    if found == "openhands":
        return found, openhands_events(_histories(whole, lines_of(text)))
    if found == "gemini":
        return found, gemini_events(lines_of(text))
    return found, _text_events((text,), _LINES.get(found, normalise_object))


def read_file(
    file: IO[str], fmt: str = "auto", piece: int = _PIECE
) -> tuple[str, Iterator[AgentEvent]]:
    """`read_text` of what is left to read of `file`: the same format, events and errors.

    Claude and Codex lines are read `piece` characters at a time as the events are asked for,
    the file's text never held whole: a large text read at once costs more in the fresh pages
    it takes than in the copying (about 20 ms of page faults at 100,000 events, an eighth of
    json.loads of every line), and memory grows with it. The head is read first, as many
    pieces as hold the lines the format is told from; the rest is read whole when the text may
    be one JSON document or is another format.
    """
    pieces = iter(partial(file.read, piece), "")
    taken, wanted = [], _SAMPLE  # the pieces read, the line feeds still to find in them
    for more in pieces:
        taken.append(more)
        wanted -= _line_feeds(more, wanted)
        if not wanted:
            break
    else:  # all of it: fewer lines than the format is told from
        return read_text("".join(taken), fmt)
    head = "".join(taken)
    found = detect_format(_head(head, _SAMPLE)) if not _may_be_one_document(head) else None
    if found in _LINES and fmt in ("auto", found):
        return found, _text_events(chain((head,), pieces), _LINES[found])
    return read_text(head + "".join(pieces), fmt)


def _may_be_one_document(head: str) -> bool:
    """Whether a text that begins with `head` (and goes on) may be one JSON document, as
    _whole_document reads it: it opens like one, and json.loads of the head finds no value
    ending before more data does ("Extra data", where the whole text fails too)."""
    if head.lstrip()[:1] not in ("{", "["):
        return False
    try:
        json.loads(head)
    except json.JSONDecodeError as exc:
        return exc.msg != "Extra data"
    except RecursionError:  # as deep in the whole text: _whole_document decides
        pass
    return True


def _head(text: str, count: int) -> list[str]:
    """The first `count` lines of `text`, as `lines_of` cuts them (without cutting all)."""
    end = _line_feed(text, count)  # the head ends with a line break, as every cut line does
    return lines_of(text if end is None else text[: end + 1])[:count]


def _line_feeds(text: str, most: int) -> int:
    """How many line feeds `text` holds, counted up to `most` (str.count reads all of it, a
    character at a time)."""
    found, end = 0, -1
    while found < most:
        end = text.find("\n", end + 1)
        if end < 0:
            break
        found += 1
    return found


def _line_feed(text: str, count: int) -> int | None:
    """Where the `count`th line feed of `text` is (-1 for none asked), None when it has fewer."""
    end = -1
    for _ in range(count):
        end = text.find("\n", end + 1)
        if end < 0:
            return None
    return end


def _whole_document(text: str) -> Any:
    """The text parsed as one JSON value (a pretty-printed object, a list), or None."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):  # nested past Python's depth: none we read
        return None


def _is_line(obj: Any) -> bool:
    """A one-line stream: the whole text is a single event of a streaming format."""
    return isinstance(obj, dict) and any(obj.get("type") in s for s in _SIGNS.values())


def _whole_format(obj: Any) -> str | None:
    if looks_like_sweagent(obj) or looks_like_mini(obj):
        return "sweagent"
    if looks_like_openhands(obj):
        return "openhands"
    if not isinstance(obj, dict):
        return None
    if obj.get("type") == "result":  # claude --output-format json
        return "claude"
    if "response" in obj or "stats" in obj:  # gemini --output-format json
        return "gemini"
    return None


def _histories(whole: Any, lines: list[str]) -> list[Any]:
    """OpenHands events: a saved list, one `history`, or an output.jsonl of either per line."""
    if isinstance(whole, list):
        return whole
    if isinstance(whole, dict):
        return _history(whole) or []
    events: list[Any] = []
    for line in lines:
        obj = parse(line)
        history = _history(obj) if isinstance(obj, dict) else None
        if history is not None:
            events.extend(history)
        elif isinstance(obj, dict):
            events.append(obj)
    return events


def _history(record: dict[str, Any]) -> list[Any] | None:
    """The events a record carries: an evaluation's `history`, a conversation's `events`."""
    for key in ("history", "events"):
        value = record.get(key)
        if isinstance(value, list):
            return value
    return None


def _text_events(pieces: Iterable[str], normalise: Normaliser) -> Iterator[AgentEvent]:
    """The events of each line of a text given in pieces (`lines_of`), in order: each line
    decoded where it lies, without cutting the text into lines first; chain flattens them in C
    (a generator resumed for every event cost as much as building the event)."""
    return chain.from_iterable(
        each_line(pieces, normalise, partial(_line_events, normalise=normalise))
    )


def _line_events(line: str, index: int, normalise: Normaliser) -> list[AgentEvent]:
    obj = parse(line)
    if isinstance(obj, dict):  # the common line first: one check
        return normalise(obj, index)
    if obj is None:
        return []
    return [AgentEvent(EventKind.ERROR, index, text=line[:500], error=obj, raw_type="invalid")]
