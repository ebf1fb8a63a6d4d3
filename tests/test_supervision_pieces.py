"""Issue 16, fifth round: a transcript read a piece at a time as the replay goes.

`formats.read_file` reads Claude and Codex lines a megabyte at a time instead of the whole
file at once, and `jsonl.each_line` joins a line that runs on from one piece into the next.
Each is held here to the plain form (the whole text read, then `read_text`), with pieces small
enough that every file is cut many times, on generated texts and on every recorded transcript.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from worker.agents import claude_stream, jsonl
from worker.agents.jsonl import lines_of
from worker.errors import MalformedInput
from worker.models import AgentEvent
from worker.supervision import formats
from worker.supervision.formats import UnreadableTranscript
from worker.supervision.postmortem import inspect_transcript, replay
from worker.supervision.settings import SupervisionSettings

FIXTURES = Path(__file__).parent / "fixtures"
LINE = json.dumps({"type": "assistant", "message": {"content": "hi é \u2028 😀"}})
CALL = json.dumps(
    {
        "type": "assistant",
        "message": {
            "model": "claude-sonnet-4-5",
            "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"x": "1"}}],
            "usage": {"input_tokens": 3, "output_tokens": 4},
        },
    }
)
PIECES = st.sampled_from(
    [LINE, CALL, '{"type":', '"user"}', "{", "[1]", "not json", " ", "\n", "\n\n", "\r\n", "\r"]
)
TEXTS = st.lists(PIECES, max_size=12).map("".join)


def _cut(text: str, sizes: list[int]) -> list[str]:
    """`text` cut into pieces of the given sizes in turn (the last piece takes the rest)."""
    pieces, start = [], 0
    for size in sizes:
        pieces.append(text[start : start + size])
        start += size
    return [*pieces, text[start:]]


@given(TEXTS, st.lists(st.integers(0, 40), max_size=8))
@example(LINE + "\n" + LINE + "\n", [len(LINE) - 1, 1, 1])  # cut just before a line feed
@example(LINE + "\n" + LINE, [len(LINE) + 1])  # the last line has no line feed
@example("\n\n", [1])
def test_a_text_in_pieces_gives_the_events_of_the_whole_text(text: str, sizes: list[int]) -> None:
    """Wherever the pieces are cut (in a line, at its line feed, empty pieces), the lines
    read are the lines of the whole text."""
    normalise = claude_stream.normalise_object
    whole = list(formats._text_events((text,), normalise))
    assert list(formats._text_events(_cut(text, sizes), normalise)) == whole


def _recorded() -> list[Path]:
    return sorted(path for path in FIXTURES.rglob("*") if path.is_file())


def _read(read: Any) -> tuple[str, list[AgentEvent]] | str:
    """A reading's format and events, or the error it raised."""
    try:
        found, events = read()
        return found, list(events)
    except MalformedInput as exc:
        return f"{type(exc).__name__}: {exc}"


def _both(path: Path, fmt: str, piece: int) -> tuple[Any, Any]:
    text = path.read_text(encoding="utf-8", errors="replace")
    with path.open(encoding="utf-8", errors="replace") as file:
        pieces = _read(lambda: formats.read_file(file, fmt, piece))
    return pieces, _read(lambda: formats.read_text(text, fmt))


@pytest.mark.parametrize("piece", [13, 997])
def test_every_recorded_file_read_in_pieces_reads_as_the_whole_text(piece: int) -> None:
    """Each file under tests/fixtures (the corpus included, whatever its format), in any
    format asked for: the same format, events and errors as read_text of the whole text."""
    checked = 0
    for path in _recorded():
        for fmt in ("auto", "claude", "codex"):
            pieces, whole = _both(path, fmt, piece)
            assert pieces == whole, (path.name, fmt)
            checked += 1
    assert checked > 300  # the fixtures are there: the loop checked something


def _transcript(tmp_path: Path, name: str, text: str, newline: str = "\n") -> Path:
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    return path


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_a_long_transcript_streams_and_reports_as_the_whole_text(
    tmp_path: Path, newline: str
) -> None:
    """A Claude transcript of many pieces (line breaks of any kind, a line longer than a
    piece, bad lines, no final line feed): the events streamed are the whole text's, and so
    is inspect's report."""
    lines = [LINE, CALL, "{not json", "", " " + CALL, '{"a": [', "x" * 300, CALL] * 40
    path = _transcript(tmp_path, "t.jsonl", "\n".join(lines), newline)
    pieces, whole = _both(path, "auto", 64)
    assert pieces == whole and pieces[0] == "claude" and len(pieces[1]) > 300
    settings = SupervisionSettings()
    report = inspect_transcript(path, settings)
    plain = replay(iter(whole[1]), settings, str(path), "claude")
    assert report == plain and report.errors == 120  # three bad lines in eight


def test_a_document_longer_than_the_head_is_still_read_whole(tmp_path: Path) -> None:
    """A pretty-printed JSON document (Claude's `--output-format json`) of more lines than the
    format is told from is one document, not lines: read whole, as before."""
    doc = {"type": "result", "result": "done", "pad": ["z"] * 200, "num_turns": 2}
    path = _transcript(tmp_path, "r.json", json.dumps(doc, indent=2))
    pieces, whole = _both(path, "auto", 16)
    assert pieces == whole and pieces[0] == "claude" and len(pieces[1]) == 1
    assert pieces[1][0].num_turns == 2


def test_gemini_lines_longer_than_the_head_are_read_whole(tmp_path: Path) -> None:
    """Gemini's deltas are joined across lines: its transcripts are read whole, as before."""
    line = json.dumps({"type": "message", "role": "assistant", "content": "a", "delta": True})
    text = json.dumps({"type": "init", "session_id": "s", "model": "m"}) + "\n"
    path = _transcript(tmp_path, "g.jsonl", text + (line + "\n") * 120)
    pieces, whole = _both(path, "auto", 50)
    assert pieces == whole and pieces[0] == "gemini"
    assert [event.text for event in pieces[1] if event.text] == ["a" * 120]


# -- lines that open brackets and never close them ------------------------------------------

UNCLOSED = ['{"a": [', "[", "[" * 50, '{"b": {"c": [1,']


def _line_by_line(text: str) -> list[AgentEvent]:
    """The events of each line decoded on its own (the plain form of each_line)."""
    normalise = claude_stream.normalise_object
    return [
        event
        for index, line in enumerate(lines_of(text))
        for event in formats._line_events(line, index, normalise)
    ]


@given(st.lists(st.sampled_from([LINE, CALL, "", "{not json", *UNCLOSED]), max_size=30))
@example([LINE, *['{"a": ['] * 2000, LINE, "[", CALL])
def test_runs_of_unclosed_lines_read_as_their_lines_one_by_one(lines: list[str]) -> None:
    """A "not JSON" event for each line that leaves brackets open, however many follow each
    other, and the good lines around them read as before."""
    text = "\n".join(lines) + "\n"
    events = list(formats._text_events((text,), claude_stream.normalise_object))
    assert events == _line_by_line(text)
    bad = [line for line in lines if line not in ("", LINE, CALL)]
    assert [event.index for event in events if event.error] == [
        index for index, line in enumerate(lines) if line in bad
    ]


def test_only_the_first_line_of_a_run_of_bad_lines_is_decoded_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The decoder reads on from a line that opens brackets into the lines after it (up to
    Python's depth, ~1,000 lines): in a run of such lines only the first is decoded where it
    lies, the others and the next good line alone, so that the run costs what plain bad lines
    cost."""
    text = "\n".join([LINE, *['{"a": ['] * 3000, LINE, LINE]) + "\n"
    in_place: list[int] = []
    scan = jsonl._SCAN

    def counted(source: str, start: int) -> tuple[Any, int]:
        if source is text:
            in_place.append(start)
        return scan(source, start)

    monkeypatch.setattr(jsonl, "_SCAN", counted)
    events = list(formats._text_events((text,), claude_stream.normalise_object))
    assert len(events) == 3003 and sum(1 for event in events if event.error) == 3000
    second = len(LINE) + 1
    assert in_place == [0, second, len(text) - len(LINE) - 1]  # the first good line, the first
    # bad one, and the line after the next good line (decoded alone, which ends the run)


@pytest.mark.parametrize("lines", [1, 60])
def test_a_text_nested_past_python_s_depth_is_no_transcript(tmp_path: Path, lines: int) -> None:
    """Brackets opened past Python's depth, on one line or many: a clear "not a transcript"
    (exit 65), not an unexpected RecursionError."""
    path = tmp_path / "deep.json"
    path.write_text("\n".join(["[" * 5_000] * lines), encoding="utf-8")
    with pytest.raises(UnreadableTranscript, match="not a transcript worker can read"):
        inspect_transcript(path, SupervisionSettings())
