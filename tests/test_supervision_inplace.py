"""Issue 16, fourth round: a transcript decoded line by line where it lies in the text.

`formats._text_events` decodes each line in place instead of cutting the text into lines
first, and `_head` cuts only the lines the format is told from. Each is held here to the plain
form it replaces (`lines_of`, then each line on its own), on generated texts and on every
recorded transcript (a JSON Lines text is cut at line feeds only: the other characters
str.splitlines cuts at may stand inside a JSON string). So are a call's mixed arguments
described once, and the collector's thresholds put back after a replay.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from worker.agents import claude_stream, codex_stream
from worker.agents.jsonl import lines_of
from worker.models import AgentEvent
from worker.supervision import formats, postmortem
from worker.supervision.detectors import StreamDetectors
from worker.supervision.settings import SupervisionSettings
from worker.supervision.signals import canonical_args, canonical_mixed

FIXTURES = Path(__file__).parent / "fixtures"
LINE = json.dumps({"type": "assistant", "message": {"content": "hi"}})
# Pieces of transcripts: whole lines, halves of objects, padding, blank lines and every line
# break str.splitlines knows (only the line feed cuts a JSON Lines text).
PIECES = st.sampled_from(
    [
        LINE,
        '{"type": "user", "message": {"content": "no"}}',
        '{"type": "system", "subtype": "init", "model": "m"}',
        '{"type":',
        '"assistant"}',
        "{",
        "}",
        "[1]",
        "3",
        "not json",
        " ",
        "\t",
        "\ufeff",
        "\n",
        "\n\n",
        "\r\n",
        "\r",
        "\x0b",
        "\x0c",
        "\x1c",
        "\x85",
        "\u2028",
        "\u2029",
    ]
)
TEXTS = st.lists(PIECES, max_size=12).map("".join)


def _plain(text: str, normalise: Any = claude_stream.normalise_object) -> list[AgentEvent]:
    """The events of a text read the plain way: cut into lines, each line on its own."""
    return [
        event
        for index, line in enumerate(lines_of(text))
        for event in formats._line_events(line, index, normalise)
    ]


@given(TEXTS)
@example(LINE + "\n" + LINE)
@example(LINE + "\n\n" + LINE + "\n")
@example('{"type": "assistant",\n"message": {}}\n' + LINE)  # an object across a line break
@example(LINE + "  \n" + LINE)  # padded after the object
@example(LINE + " x\n")
@example(LINE + "\u2028" + LINE)
@example("")
def test_a_text_decoded_in_place_gives_the_events_of_its_lines_one_by_one(text: str) -> None:
    """Whatever the lines hold (half objects, padding, blank lines, other line breaks), the
    in-place reading gives, event for event, what cutting the text into lines gave."""
    assert list(formats._text_events(text, claude_stream.normalise_object)) == _plain(text)


def test_a_line_break_inside_a_json_string_does_not_cut_its_line() -> None:
    """U+2028, U+2029 and U+0085 may stand unescaped in a JSON string, as Claude Code writes
    them: the line is one event with its text whole, not two lines that are not JSON."""
    said = "one\u2028two\u2029three\x85four"
    message = {"content": [{"type": "text", "text": said}]}
    line = json.dumps({"type": "assistant", "message": message}, ensure_ascii=False)
    assert "\u2028" in line  # raw in the line, not escaped
    events = list(formats._text_events(line + "\n" + LINE + "\n", claude_stream.normalise_object))
    assert [event.text for event in events] == [said, "hi"]
    assert lines_of(line + "\n") == [line]


@pytest.mark.parametrize("opening", ["[", '{"a": ['])
def test_lines_that_open_brackets_and_never_close_them_are_each_an_error(opening: str) -> None:
    """The decoder reads on past a line's end into an unclosed bracket's next lines, and past
    Python's depth raises RecursionError: each line is still a "not JSON" event of its own."""
    text = LINE + "\n" + (opening + "\n") * 5000 + LINE + "\n"
    events = list(formats._text_events(text, claude_stream.normalise_object))
    assert len(events) == 5002 and events[0].text == events[-1].text == "hi"
    assert {event.error[:9] for event in events[1:-1]} == {"not JSON:"}  # type: ignore[index]
    assert formats._line_events(opening * 5000, 0, claude_stream.normalise_object)[0].error == (
        "not JSON: nested too deeply"
    )


@given(TEXTS, st.integers(0, 6))
@example("a\nb\nc\n", 2)
@example("a\nb\nc", 3)
@example("a\r\nb\rc\nd\n", 2)
def test_the_head_is_the_first_lines_of_the_text(text: str, count: int) -> None:
    assert formats._head(text, count) == lines_of(text)[:count]


def _transcripts() -> list[Path]:
    return sorted(
        path
        for path in FIXTURES.rglob("*")
        if path.is_file() and path.suffix in (".jsonl", ".json", ".traj")
    )


@pytest.mark.parametrize(
    "normalise",
    [claude_stream.normalise_object, codex_stream.codex_object],
    ids=["claude", "codex"],
)
def test_every_recorded_file_reads_in_place_as_it_read_line_by_line(normalise: Any) -> None:
    """Each file under tests/fixtures, read by the Claude and the Codex normaliser: the same
    events in place as cut into lines first (the corpus included)."""
    checked = 0
    for path in _transcripts():
        text = path.read_text(encoding="utf-8", errors="replace")
        assert list(formats._text_events(text, normalise)) == _plain(text, normalise), path.name
        checked += 1
    assert checked > 50  # the fixtures are there: the loop checked something


ARGS = st.dictionaries(
    st.sampled_from(["command", "id", "description", "x"]),
    st.one_of(
        st.integers(),
        st.floats(allow_nan=False),
        st.booleans(),
        st.none(),
        st.text(max_size=8),
        st.lists(st.text(max_size=4), max_size=2),
    ),
    min_size=1,
    max_size=4,
)


@given(ARGS)
@example({"x": 1})
@example({"command": "ls", "id": 3})
@example({"command": ["ls", "-l"], "description": "list"})
def test_a_call_of_mixed_arguments_is_described_as_canonical_args_describes_it(
    args: dict[str, Any],
) -> None:
    """The detectors describe a call canonical_strings does not take with canonical_mixed
    alone: the canonical arguments are canonical_args', whatever the values."""
    settings = SupervisionSettings()
    volatile = frozenset(settings.volatile_keys)
    plain = canonical_args(args, volatile)
    assert StreamDetectors(settings)._describe("Bash", args, None)[1] == plain
    assert canonical_mixed(args, volatile) == plain


def test_inspect_puts_the_collector_s_thresholds_back(tmp_path: Path) -> None:
    """The collector runs rarely during a replay and as before after it, even when the
    replay fails."""
    before = gc.get_threshold()
    path = tmp_path / "t.jsonl"
    path.write_text(LINE + "\n", encoding="utf-8")
    report = postmortem.inspect_transcript(path, SupervisionSettings())
    assert report.events == 1 and gc.get_threshold() == before
    with pytest.raises(RuntimeError), postmortem._collector_paused():
        assert gc.get_threshold()[0] > before[0]
        raise RuntimeError("the replay failed")
    assert gc.get_threshold() == before
