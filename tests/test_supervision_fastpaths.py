"""Issue 16: `worker inspect`'s fast paths give exactly what the plain code they replace gave.

Each shortcut (a cheap check before a regular expression, a pattern rewritten to start with a
character class, memoised signatures, the JSON decoder called without json.loads' wrapper,
AgentEvent as a NamedTuple) is held here to the straightforward version, on generated input.
"""

from __future__ import annotations

import json
import pickle
import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from worker.agents import claude_stream
from worker.agents.jsonl import as_int, as_str, loads, parse, tool_call, tool_result, usage_event
from worker.models import AgentEvent, EventKind
from worker.process.boundedio import clip_event
from worker.supervision import formats, signals
from worker.supervision.progress import Knowledge, shell_writes
from worker.supervision.signals import (
    answer_signature,
    canonical_args,
    error_signature,
    failure_class,
    message_signature,
)

# The plain forms of patterns written for speed, to compare with.
DURATION = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds?|m|min|minutes?|h)\b")
SPACE = re.compile(r"\s+")
VOLATILE = signals._VOLATILE_VALUE  # the pattern in use: a new kind of id needs a new check
KEYS = frozenset({"id", "description", "timestamp"})

# Text made of what the patterns look for: hex and other digits (Arabic-Indic too), dashes,
# colons, id prefixes, units, and whitespace of several kinds.
PIECES = st.sampled_from(
    [
        *("a", "f", "F", "0", "9", "٣", "-", "_", ":", "T", "Z", ".", "+", "s", "ms", "min"),
        *(" ", "\n", "\t", "\u2003", "\x1c", "x", "é", "2026", "deadbeef", "QRSTUV"),
        *("toolu_", "msg_", "call_", "item_"),
    ]
)
TEXTS = st.one_of(st.text(), st.lists(PIECES, max_size=60).map("".join))


@given(TEXTS)
@example("3f2a9c1e-1b2c-4d5e-8f90-123456789abc")
@example("at 2026-01-02T03:04:05.123+01:00 done")
@example("٢٠٢٦-٠١-٠٢T٠٣:٠٤:٠٥Z")  # other scripts' digits are digits to `\d`
@example("id toolu_01ABCDEFG and msg_ABCDEF")
@example("see msg_QRSTUV now")
@example("see call_zzzzzz now")
@example("see item_Wxyzuv now")
@example("see toolu_QRSTUV now")
@example("deadbeefcafe")
def test_ids_are_stripped_exactly_as_the_whole_pattern_strips_them(text: str) -> None:
    """The cheap check before the volatile-value pattern never skips a text the pattern
    would change (held to the pattern in use, so that a new kind of id needs a new check)."""
    assert signals._strip_ids(text) == VOLATILE.sub("<id>", text)


@given(TEXTS)
@example("2 failed in 0.31s, 1 passed in 12 ms; x3s 4min")
@example("a1s 1s _2s ٣s")
def test_durations_are_blurred_as_the_plain_pattern_blurs_them(text: str) -> None:
    assert signals._DURATION.sub("<t>", text) == DURATION.sub("<t>", text)


@given(TEXTS)
@example(" a \t b\u2003\x1c c \n")
def test_whitespace_is_squeezed_as_the_pattern_squeezes_it(text: str) -> None:
    assert signals._squeeze(text) == SPACE.sub(" ", text).strip()


def _plain_answer(text: str | None, limit: int = 2000) -> str:
    text = DURATION.sub("<t>", VOLATILE.sub("<id>", (text or "")[:limit]))
    return SPACE.sub(" ", text).strip()


@given(TEXTS)
def test_memoised_signatures_are_the_plain_ones(text: str) -> None:
    """Asked twice (the second answer comes from the memo), a signature is what the plain
    code computes."""
    for _ in range(2):
        assert answer_signature(text) == _plain_answer(text)
        assert message_signature(text, 3) == (
            None if len(SPACE.sub(" ", text).strip()) < 3 else SPACE.sub(" ", text).strip()
        )
        own = signals._error_text.__wrapped__(text[:4000]) if text else ""
        assert error_signature(text) == (signals._blur(own) if own else "")
        assert signals.result_signature(text) == signals._blur(signals._TAG.sub("", text[:2000]))
        assert failure_class(text) == signals._failure_class.__wrapped__(text[:1000])


def _plain_canonical(args: dict[str, Any] | None, volatile_keys: frozenset[str]) -> str:
    if not args:
        return "{}"
    if all(isinstance(v, str | int | float | bool | type(None)) for v in args.values()):
        flat = {k: v for k, v in args.items() if k not in volatile_keys}
        encoded = json.dumps(flat, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return VOLATILE.sub("<id>", encoded)
    return json.dumps(
        signals.strip_volatile(args, volatile_keys),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )


SCALARS = st.one_of(
    st.text(max_size=20),
    TEXTS,
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
)
ARGS = st.dictionaries(
    st.one_of(st.sampled_from(["command", "id", "description", "file_path"]), st.text()),
    st.one_of(SCALARS, st.lists(SCALARS, max_size=3), st.dictionaries(st.text(), SCALARS)),
    max_size=5,
)


@given(ARGS)
@example({"x": 1})
@example({"x": 1.0})
@example({"x": True})
@example({"x": -0.0})
@example({"command": "ls", "description": "look"})
@example({"command": "cat " + "deadbeefcafe0 " * 400})  # too long to be memoised
def test_canonical_arguments_are_the_plain_ones_memoised_or_not(args: dict[str, Any]) -> None:
    """1, 1.0 and True are equal keys to a memo but not the same JSON: only string values
    are memoised."""
    for _ in range(2):
        assert canonical_args(args, KEYS) == _plain_canonical(args, KEYS)


def _outcome(fn: Any, line: str) -> tuple[Any, ...]:
    try:
        return ("value", json.dumps(fn(line), sort_keys=True))
    except json.JSONDecodeError as exc:
        return ("error", exc.msg, exc.pos)


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    _containers,
    max_leaves=10,
)


@given(st.one_of(JSON.map(json.dumps), st.text(), JSON.map(lambda v: json.dumps(v) + " x")))
@example('{"a": 1} {"b": 2}')
@example('\ufeff{"a": 1}')
@example('{"a": "unterminated')
@example("")
def test_a_line_decodes_to_json_loads_value_or_its_very_error(line: str) -> None:
    line = line.strip()
    assert _outcome(loads, line) == _outcome(json.loads, line)


def test_a_bad_line_is_named_as_json_loads_names_it() -> None:
    assert parse('{"type": "x"} trailing') == "not JSON: Extra data"
    assert parse("[1, 2]") == "not a JSON object"
    assert parse("   ") is None


def test_knowledge_learns_new_calls_and_new_answers_only() -> None:
    known = Knowledge()
    assert known.learn("Read {}", "one")
    assert not known.learn("Read {}", "one")
    assert known.learn("Read {}", "two")
    assert known.learn("Bash {}", "two")


def test_shell_writes_is_the_same_asked_again() -> None:
    """The memo of commands answers as the pattern does, for a write and for a read."""
    for _ in range(2):
        assert shell_writes({"command": "sed -i s/a/b/ f.py"})
        assert shell_writes({"cmd": ["bash", "-lc", "echo x > out.txt"]})
        assert not shell_writes({"command": "pytest -q 2>&1"})
        assert shell_writes({"command": "true " * 1000 + "> out.txt"})  # too long to memoise


def test_an_agent_event_is_an_immutable_record_that_copies_and_pickles() -> None:
    """AgentEvent is a NamedTuple: no field can be set, `_replace` copies, it pickles, and
    events with equal fields are equal."""
    event = AgentEvent(EventKind.TOOL_CALL, 3, tool="Bash", args={"command": "ls"})
    with pytest.raises(AttributeError):
        event.tool = "Read"  # type: ignore[misc]  # the point: it cannot be set
    copy = event._replace(tool="Read")
    assert (copy.tool, event.tool, copy.index, copy.args) == ("Read", "Bash", 3, event.args)
    assert pickle.loads(pickle.dumps(event)) == event
    assert event == AgentEvent(EventKind.TOOL_CALL, 3, tool="Bash", args={"command": "ls"})
    assert event.is_error is False and event.raw_type is None


def test_clipping_an_event_keeps_its_other_fields() -> None:
    event = AgentEvent(EventKind.TOOL_RESULT, 7, tool_id="t1", text="x" * 50_000, is_error=True)
    clipped = clip_event(event, cap=1000)
    assert clipped.text is not None and len(clipped.text) < 2000
    assert clipped._replace(text=event.text) == event


def test_tool_events_built_by_position_are_the_keyword_ones() -> None:
    """tool_call and tool_result build AgentEvents by position, for speed: field for field,
    they are what the keyword form builds."""
    call = tool_call(4, "Bash", "t1", {"command": "ls"}, "assistant")
    assert call == AgentEvent(
        EventKind.TOOL_CALL,
        4,
        tool="Bash",
        tool_id="t1",
        args={"command": "ls"},
        raw_type="assistant",
    )
    assert tool_call(4, None, None, ["not", "a", "dict"], "x").args == {}
    result = tool_result(5, "t1", failed=True, output="y" * 3000, error="boom", raw_type="user")
    assert result == AgentEvent(
        EventKind.TOOL_RESULT,
        5,
        tool_id="t1",
        is_error=True,
        text="y" * 2000,
        error="boom",
        raw_type="user",
    )
    assert result._asdict()["raw_type"] == "user" and call._asdict()["tool"] == "Bash"


# -- the second round: messages, lines and arguments built with fewer Python calls ---------


def _plain_message_events(obj: dict[str, Any], index: int, role: str) -> list[AgentEvent]:
    """A Claude message's events as the keyword-built code made them before."""
    message = obj.get("message")
    if not isinstance(message, dict):
        return [AgentEvent(EventKind.OTHER, index, raw_type=role)]
    content = message.get("content")
    events: list[AgentEvent] = []
    if isinstance(content, str):
        if role == "assistant" and content:
            events.append(AgentEvent(EventKind.TEXT, index, text=content, raw_type=role))
        return events
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype == "text" and role == "assistant":
            text = str(block.get("text", ""))
            events.append(AgentEvent(EventKind.TEXT, index, text=text, raw_type=role))
        elif btype == "tool_use":
            args = block.get("input")
            events.append(
                AgentEvent(
                    EventKind.TOOL_CALL,
                    index,
                    tool=as_str(block.get("name")),
                    tool_id=as_str(block.get("id")),
                    args=args if isinstance(args, dict) else {},
                    raw_type=role,
                )
            )
        elif btype == "tool_result":
            failed = bool(block.get("is_error"))
            text = claude_stream._content_text(block.get("content"))
            events.append(
                AgentEvent(
                    EventKind.TOOL_RESULT,
                    index,
                    tool_id=as_str(block.get("tool_use_id")),
                    text=text[:2000],
                    is_error=failed,
                    error=text[:500] if failed else None,
                    raw_type=role,
                )
            )
    usage = message.get("usage")
    if role == "assistant" and isinstance(usage, dict):
        tokens = sum(
            as_int(usage.get(key))
            for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        events.append(
            AgentEvent(
                EventKind.USAGE,
                index,
                model=as_str(message.get("model")),
                input_tokens=tokens,
                output_tokens=as_int(usage.get("output_tokens")),
                raw_type=role,
            )
        )
    return events


ODD = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)
)
BLOCKS = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("tool_use"), "id": ODD, "name": ODD},
        optional={"input": st.one_of(ODD, st.dictionaries(st.text(max_size=5), ODD))},
    ),
    st.fixed_dictionaries(
        {"type": st.just("tool_result"), "tool_use_id": ODD},
        optional={
            "is_error": ODD,
            "content": st.one_of(
                ODD,
                st.text(min_size=490, max_size=2100),
                st.lists(st.one_of(ODD, st.fixed_dictionaries({"text": ODD})), max_size=3),
            ),
        },
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "thinking", None])}, optional={"text": ODD}
    ),
    ODD,
)
MESSAGES = st.fixed_dictionaries(
    {"type": st.sampled_from(["assistant", "user"])},
    optional={
        "message": st.one_of(
            ODD,
            st.fixed_dictionaries(
                {},
                optional={
                    "content": st.one_of(ODD, st.lists(BLOCKS, max_size=4)),
                    "model": ODD,
                    "usage": st.one_of(
                        ODD,
                        st.fixed_dictionaries(
                            {},
                            optional={
                                key: ODD
                                for key in (
                                    "input_tokens",
                                    "cache_creation_input_tokens",
                                    "cache_read_input_tokens",
                                    "output_tokens",
                                )
                            },
                        ),
                    ),
                },
            ),
        )
    },
)


@given(MESSAGES, st.integers(0, 10**6))
@example({"type": "user", "message": {"content": [{"type": "text", "text": "no"}]}}, 3)
@example({"type": "assistant", "message": {"usage": {"input_tokens": True}}}, 0)
@example(
    {
        "type": "user",
        "message": {
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "is_error": 1, "content": "e" * 3000},
                {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls"}},
            ]
        },
    },
    5,
)
@example(
    {
        "type": "assistant",
        "message": {
            "model": "claude-x",
            "content": [{"type": "text", "text": "hi"}, {"type": "tool_use", "input": [1]}],
            "usage": {"input_tokens": 3, "cache_read_input_tokens": 7.5, "output_tokens": 2},
        },
    },
    1,
)
def test_a_message_s_events_are_the_keyword_built_ones(obj: dict[str, Any], index: int) -> None:
    """Built by position with as_str inlined, a Claude message gives field for field the
    events the keyword-built code gave, whatever odd values its blocks hold."""
    role = obj["type"]
    assert claude_stream._message_events(obj, index, role) == _plain_message_events(
        obj, index, role
    )
    events = claude_stream.normalise_object(obj, index)
    plain = _plain_message_events(obj, index, role)
    assert events[: len(plain)] == plain


def _plain_line_events(line: str, index: int) -> list[AgentEvent]:
    obj = parse(line)
    if obj is None:
        return []
    if isinstance(obj, str):
        return [AgentEvent(EventKind.ERROR, index, text=line[:500], error=obj, raw_type="invalid")]
    return claude_stream.normalise_object(obj, index)


LINES = st.one_of(
    MESSAGES.map(json.dumps),
    JSON.map(json.dumps),
    st.text(),
    st.tuples(st.sampled_from(["", " ", "\t", "\u2003", "\ufeff"]), MESSAGES.map(json.dumps)).map(
        lambda pair: pair[0] + pair[1] + pair[0]
    ),
)


@given(LINES)
@example("")
@example("   ")
@example('{"type": "assistant"} {"b": 2}')
@example('{"type": "assistant"')
@example("[1, 2]")
@example('\ufeff{"type": "user"}')
def test_a_transcript_line_gives_the_events_parse_gave(line: str) -> None:
    """formats decodes a whole-object line in place and leaves the rest (blank, padded,
    not JSON, not an object) to parse(): the same events as parse() then normalising."""
    assert formats._line_events(line, 7, claude_stream.normalise_object) == _plain_line_events(
        line, 7
    )


def test_usage_events_built_by_position_are_the_keyword_ones() -> None:
    event = usage_event(2, "claude-x", 1200, 40, "assistant")
    assert event == AgentEvent(
        EventKind.USAGE,
        2,
        model="claude-x",
        input_tokens=1200,
        output_tokens=40,
        raw_type="assistant",
    )
    assert event._asdict()["cost_usd"] is None and event.raw_type == "assistant"


@given(st.dictionaries(st.text(), SCALARS, max_size=5))
@example({"b": 1.5, "a": float("inf"), "c": None, "é": "ü\n\u2028"})
def test_flat_arguments_are_encoded_as_the_configured_encoder_encodes_them(
    flat: dict[str, Any],
) -> None:
    """canonical_args' encoder, built once, writes what JSONEncoder.encode with the same
    options writes."""
    assert signals._encode(flat) == signals._CANONICAL.encode(flat)


def test_shell_writes_looks_only_at_a_call_that_holds_a_command() -> None:
    assert not shell_writes({"file_path": "a > b", "old_string": "rm -rf x"})
    assert shell_writes({"file_path": "x", "script": "touch y"})


@given(TEXTS, st.integers(1, 90))
@example("a `b`\n\t c " * 10, 20)
@example("x" * 5000, 80)  # too long to be memoised
def test_short_text_is_the_plain_one_memoised_or_not(text: str, limit: int) -> None:
    plain = SPACE.sub(" ", text).strip().replace("`", "'")
    plain = plain if len(plain) <= limit else plain[: limit - 1] + "…"
    for _ in range(2):
        assert signals.short(text, limit) == (plain if text else "")
