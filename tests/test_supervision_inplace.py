"""Issue 16, fourth round: a transcript decoded line by line where it lies in the text.

`formats._text_events` decodes each line in place instead of cutting the text into lines
first, and `_head` cuts only the lines the format is told from. Each is held here to the plain
form it replaces (str.splitlines, then each line on its own), on generated texts and on every
recorded transcript. So are a call's mixed arguments described once, and the collector's
thresholds put back after a replay.
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
from worker.agents.jsonl import only_newlines
from worker.models import AgentEvent
from worker.supervision import formats, postmortem
from worker.supervision.detectors import StreamDetectors
from worker.supervision.settings import SupervisionSettings
from worker.supervision.signals import canonical_args, canonical_mixed

FIXTURES = Path(__file__).parent / "fixtures"
LINE = json.dumps({"type": "assistant", "message": {"content": "hi"}})
# Pieces of transcripts: whole lines, halves of objects, padding, blank lines and every line
# break str.splitlines knows (the in-place reading must leave a text holding one of the others
# to splitlines).
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


def _plain(text: str) -> list[AgentEvent]:
    """The events of a text as read before: cut by str.splitlines, each line on its own."""
    lines = text.splitlines()
    return [
        event
        for index, line in enumerate(lines)
        for event in formats._line_events(line, index, claude_stream.normalise_object)
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


@given(TEXTS)
@example("a\r\nb")
@example("a\nb\n")
def test_only_newlines_is_whether_splitlines_cuts_at_line_feeds_alone(text: str) -> None:
    cut = text.split("\n") if text else []
    plain = cut[:-1] if text.endswith("\n") else cut
    assert only_newlines(text) == (text.splitlines() == plain)


@given(TEXTS, st.integers(0, 6))
@example("a\nb\nc\n", 2)
@example("a\nb\nc", 3)
@example("a\r\nb\rc\nd\n", 2)
def test_the_head_is_the_first_lines_splitlines_cuts(text: str, count: int) -> None:
    assert formats._head(text, count) == text.splitlines()[:count]


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
        lines = text.splitlines()
        assert list(formats._text_events(text, normalise)) == list(
            formats._events(lines, normalise)
        ), path.name
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
