"""Reading and logging a child's output within fixed bounds, whatever it prints.

An agent once printed a single 300 MB line: read whole, it raised worker's memory past 600 MB
and wrote 300 MB of log per iteration. Here:

- `bounded_lines` reads raw bytes in chunks and yields lines of at most `line_cap` bytes; the
  rest of a longer line is dropped and the line ends with a marker saying how much;
- `clip_event` keeps at most `EVENT_TEXT_CAP` characters of an event's text and of each
  string in its tool arguments (head and tail: a STATUS block at the end survives), so the
  events of one iteration, which worker keeps, stay small however many the agent prints;
- `CappedLog` writes a log of at most `cap` bytes: the head as it comes, then, past the cap,
  only the last `cap // 4` bytes are kept (in memory) and written after a marker on close.

Memory stays within about `line_cap` + the log's tail + one read chunk, plus the clipped
events.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from worker.models import AgentEvent

LINE_CAP = 8 * 1024 * 1024  # one event of a stream-json agent: far above any real one
LOG_CAP = 64 * 1024 * 1024  # one iteration's log
EVENT_TEXT_CAP = 64 * 1024  # text kept in memory per event (a STATUS block ends a text)
_CHUNK = 64 * 1024


def line_marker(dropped: int, cap: int) -> str:
    return f" [worker: line cut at {cap} bytes; {dropped} more bytes dropped]"


def bounded_lines(stream: IO[bytes] | IO[str], line_cap: int = LINE_CAP) -> Iterator[str]:
    """The stream's lines (with their newline), decoded as UTF-8 (bad bytes replaced), each
    cut at `line_cap` bytes with a marker. A text stream is read through its byte buffer."""
    # A text stream's bytes are its buffer's.
    raw: IO[bytes] = getattr(stream, "buffer", stream)  # type: ignore[arg-type]
    read: Callable[[int], bytes] = getattr(raw, "read1", raw.read)
    kept = bytearray()
    dropped = 0
    while True:
        data = read(_CHUNK)
        if not data:
            break
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            stop = len(data) if end < 0 else end
            room = line_cap - len(kept)
            piece = stop - start
            kept += data[start : start + min(piece, room)]
            dropped += max(0, piece - room)
            if end < 0:
                break
            yield _finish(kept, dropped, line_cap) + "\n"
            kept, dropped = bytearray(), 0
            start = end + 1
    if kept or dropped:
        yield _finish(kept, dropped, line_cap)


def _finish(kept: bytearray, dropped: int, cap: int) -> str:
    text = kept.decode("utf-8", errors="replace")
    return text + line_marker(dropped, cap) if dropped else text


class CappedLog:
    """An append-only log file of at most about `cap` bytes (head, marker, tail)."""

    def __init__(
        self, path: Path, cap: int = LOG_CAP, hide: Callable[[str], str] | None = None
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.hide = hide  # what a line keeps of itself in the log (secrets hidden)
        self.tail_cap = cap // 4
        self.head_cap = cap - self.tail_cap
        self._file = path.open("ab")
        self.written = self._file.tell()  # an earlier attempt's lines count too
        self.omitted = 0
        self._tail: deque[bytes] = deque()
        self._tail_size = 0

    def write(self, text: str) -> None:
        if self.hide is not None:
            text = self.hide(text)
        data = text.encode("utf-8", errors="replace")
        if self.written + len(data) <= self.head_cap and not self._tail:
            self._file.write(data)
            self.written += len(data)
            return
        self._tail.append(data)
        self._tail_size += len(data)
        while self._tail_size > self.tail_cap and len(self._tail) > 1:
            old = self._tail.popleft()
            self._tail_size -= len(old)
            self.omitted += len(old)
        if self._tail_size > self.tail_cap:  # one line longer than the whole tail
            only = self._tail.pop()
            cut = len(only) - self.tail_cap
            self._tail.append(only[cut:])
            self._tail_size, self.omitted = self.tail_cap, self.omitted + cut

    def close(self) -> None:
        if self.omitted:
            marker = f"[worker: {self.omitted} bytes of output left out of this log]\n"
            self._file.write(marker.encode())
        for data in self._tail:
            self._file.write(data)
        self._tail.clear()
        self._file.close()


def clip_text(text: str, cap: int = EVENT_TEXT_CAP) -> str:
    if len(text) <= cap:
        return text
    half = cap // 2
    return f"{text[:half]}\n[worker: {len(text) - 2 * half} characters left out]\n{text[-half:]}"


def clip_event(event: AgentEvent, cap: int = EVENT_TEXT_CAP) -> AgentEvent:
    """The event with its text and its tool arguments' strings clipped to `cap` characters."""
    text_long = event.text is not None and len(event.text) > cap
    args_long = event.args is not None and len(json.dumps(event.args)) > cap
    if not text_long and not args_long:
        return event
    return event._replace(
        text=clip_text(event.text, cap) if event.text is not None else None,
        args=_clip_args(event.args, cap) if event.args is not None else None,
    )


def _clip_args(value: Any, cap: int) -> Any:
    if isinstance(value, str):
        return clip_text(value, cap)
    if isinstance(value, dict):
        return {key: _clip_args(item, cap) for key, item in value.items()}
    if isinstance(value, list):
        return [_clip_args(item, cap) for item in value]
    return value
