"""Small helpers for reading JSON lines of agent CLIs into AgentEvents: tolerant, never raising.

The events every CLI has (a line that is not JSON, a tool call, its result) are built here, so
that their caps are the same whichever agent ran.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

from worker.models import AgentEvent, EventKind

# Read once: on Python 3.11 `EventKind.X` goes through EnumType.__getattr__, ten times the
# cost of a global, and every tool call and result of a stream is built here.
_TOOL_CALL, _TOOL_RESULT, _USAGE = EventKind.TOOL_CALL, EventKind.TOOL_RESULT, EventKind.USAGE
# An AgentEvent from a tuple of all its fields in order, in one C call: the NamedTuple's own
# __new__ is a Python function of 18 keywords (_make another), and a stream's events are built
# here. A test holds each builder to the keyword form.
new_event: Callable[[tuple[Any, ...]], AgentEvent] = partial(tuple.__new__, AgentEvent)
# json.loads wraps the decoder in a type check and two whitespace matches, 40% of the time of
# a typical stream line, and JSONDecoder.raw_decode a Python frame; a stripped line needs none
# of them. The decoder's own scanner: (value, end), or it raises StopIteration (nothing to
# decode), JSONDecodeError or RecursionError (nested past Python's depth, perhaps across
# lines: see each_line); then json.loads is asked, for its very error.
# (scan_once is set in JSONDecoder.__init__; typeshed does not declare it)
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_NOT_DECODED = (StopIteration, ValueError, RecursionError)
Normaliser = Callable[[dict[str, Any], int], list[AgentEvent]]  # an adapter's, for one line


def loads(line: str) -> Any:
    """`json.loads(line)` of a line with no surrounding whitespace: the same value, or the
    same JSONDecodeError (a line the decoder does not take whole goes through json.loads)."""
    try:
        value, end = _SCAN(line, 0)
    except _NOT_DECODED:
        return json.loads(line)
    return value if end == len(line) else json.loads(line)


def parse(line: str) -> dict[str, Any] | str | None:
    """A line's JSON object; None for a blank line; the problem's text when it is not one."""
    try:  # the common line, one JSON object and nothing else, decoded at once
        obj, end = _SCAN(line, 0)
        if end == len(line) and obj.__class__ is dict:
            return obj
    except _NOT_DECODED:
        pass
    line = line.strip()  # padded, blank or bad: json.loads decides, and names the problem
    if not line:
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"not JSON: {exc.msg}"
    except RecursionError:
        return "not JSON: nested too deeply"
    return obj if isinstance(obj, dict) else "not a JSON object"


def lines_of(text: str) -> list[str]:
    """The lines of a JSON Lines text, cut at line feeds only, as the format defines them:
    U+2028, U+0085 and the like, which `str.splitlines` also cuts at, may stand unescaped
    inside a JSON string (Claude Code writes them so). No empty line after a final line feed."""
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def each_line(
    pieces: Iterable[str],
    normalise: Normaliser,
    other: Callable[[str, int], list[AgentEvent]],
) -> Iterator[list[AgentEvent]]:
    """The events of each line of a text given in pieces (a file read a megabyte at a time, or
    the whole text as one piece), the lines of `lines_of`, in order: `normalise(obj, index)` of
    a line that is one JSON object and nothing else, decoded where it lies in its piece (no
    copy of the line); `other(line, index)` of any other line (blank, padded, not JSON, not an
    object). A line that runs on into the next piece is joined to it."""
    scan, index, alone = _SCAN, 0, False
    rest: list[str] = []  # the pieces of a line not ended yet, joined once when it ends
    for piece in pieces:
        if rest:
            if piece.find("\n") < 0:
                rest.append(piece)
                continue
            text = "".join([*rest, piece])
        else:
            text = piece
        find = text.find
        start, stop = 0, find("\n")
        while stop >= 0:
            if alone:  # after a line that is not one object: see below
                line = text[start:stop]
                obj = parse(line)
                if isinstance(obj, dict):
                    alone = False
                    yield normalise(obj, index)
                else:
                    yield other(line, index)
            else:
                try:
                    obj, end = scan(text, start)
                except _NOT_DECODED:
                    obj, end = None, start
                # The object must end where the line does: a line break is JSON whitespace,
                # and the decoder may have read on past it (to the end of the piece at the
                # most: a line it would have to read on for is no line of one object anyway).
                if end == stop and obj.__class__ is dict:
                    yield normalise(obj, index)
                else:
                    # A line that opens brackets and never closes them lets the decoder read
                    # on into the next ones (up to Python's depth, ~1,000 lines, if they open
                    # more): the lines after it are decoded alone until one is an object.
                    alone = True
                    yield other(text[start:stop], index)
            start, index = stop + 1, index + 1
            stop = find("\n", start)
        rest = [text[start:]] if start < len(text) else []
    if rest:  # the last line, without a line feed
        yield other("".join(rest), index)


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
    args = args if isinstance(args, dict) else {}
    # fmt: off
    return new_event((  # AgentEvent's fields in order: see new_event
        _TOOL_CALL, index, None, None, None, tool, tool_id, args, False, None,
        None, None, None, None, None, None, None, raw_type,
    ))
    # fmt: on


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
    # fmt: off
    return new_event((
        _TOOL_RESULT, index, None, None, output[:2000], None, tool_id, None, failed, error,
        None, None, None, None, None, None, None, raw_type,
    ))
    # fmt: on


def usage_event(
    index: int, model: str | None, input_tokens: int, output_tokens: int, raw_type: str
) -> AgentEvent:
    """A turn's usage: the model, the context size (input_tokens) and the output tokens."""
    # fmt: off
    return new_event((
        _USAGE, index, None, model, None, None, None, None, False, None,
        input_tokens, output_tokens, None, None, None, None, None, raw_type,
    ))
    # fmt: on
