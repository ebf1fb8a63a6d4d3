"""Claude stream-json normalisation, including the recorded real transcripts."""

from __future__ import annotations

import json

import pytest

from worker.agents.claude import StreamCollector
from worker.agents.claude_stream import normalise_line, normalise_lines
from worker.models import EventKind

from .conftest import TRANSCRIPTS


def test_simple_text_transcript() -> None:
    lines = (TRANSCRIPTS / "claude-stream-simple-text.jsonl").read_text().splitlines()
    collector = StreamCollector()
    for line in lines:
        collector.feed(line)
    result = collector.result(0)
    kinds = [event.kind for event in result.events]
    assert kinds[0] is EventKind.SESSION
    assert EventKind.TEXT in kinds and kinds[-1] is EventKind.RESULT
    assert result.session_id == "13a34b05-d65d-4e6e-bb70-00ef7be077a8"
    assert result.final_text == "4"
    assert result.is_error is False
    assert result.cost_usd > 0


def test_rate_limit_allowed_is_not_a_limit_and_empty_result_falls_back() -> None:
    lines = (TRANSCRIPTS / "claude-stream-rate-limit-overage-rejected.jsonl").read_text()
    collector = StreamCollector()
    for line in lines.splitlines():
        collector.feed(line)
    result = collector.result(0)
    limits = [e for e in result.events if e.kind is EventKind.RATE_LIMIT]
    assert limits[0].status == "allowed" and limits[0].resets_at == 1774447200
    assert result.usage_limit_hit is False
    # anthropics/claude-code#38673: `result` is empty; the last assistant text stands in.
    assert result.final_text == "\n\nHello."


def test_session_log_with_tool_errors_parses() -> None:
    path = TRANSCRIPTS / "claude-session-main-with-compaction.jsonl"
    events = list(normalise_lines(path.read_text().splitlines()))
    calls = [e for e in events if e.kind is EventKind.TOOL_CALL]
    errors = [e for e in events if e.kind is EventKind.TOOL_RESULT and e.is_error]
    assert calls and all(call.tool for call in calls)
    assert len(errors) >= 2
    assert not [e for e in events if e.kind is EventKind.ERROR]


@pytest.mark.parametrize(
    "name", sorted(p.name for p in TRANSCRIPTS.glob("*.json*")) if TRANSCRIPTS.is_dir() else []
)
def test_every_recorded_transcript_normalises_without_raising(name: str) -> None:
    text = (TRANSCRIPTS / name).read_text()
    lines = text.splitlines() if name.endswith(".jsonl") else [json.dumps(json.loads(text))]
    events = list(normalise_lines(lines))
    assert len(events) >= 1


def test_rejected_rate_limit_marks_the_usage_limit() -> None:
    collector = StreamCollector()
    collector.feed(
        json.dumps(
            {
                "type": "rate_limit_event",
                "rate_limit_info": {
                    "status": "rejected",
                    "resetsAt": 1800000000,
                    "rateLimitType": "five_hour",
                },
            }
        )
    )
    result = collector.result(1)
    assert result.usage_limit_hit and result.rate_limited_until == 1800000000


def test_error_result_never_records_a_session_id() -> None:
    collector = StreamCollector()
    collector.feed(json.dumps({"type": "system", "subtype": "init", "session_id": "abc"}))
    collector.feed(
        json.dumps(
            {
                "type": "result",
                "subtype": "success",
                "is_error": True,
                "result": "API Error: 500",
                "session_id": "abc",
            }
        )
    )
    result = collector.result(0)
    assert result.is_error and result.session_id is None


def test_garbage_and_unknown_events_are_named_not_fatal() -> None:
    assert normalise_line("not json")[0].kind is EventKind.ERROR
    assert normalise_line("[1, 2]")[0].kind is EventKind.ERROR
    assert (
        normalise_line('{"type": "system", "subtype": "hook_started"}')[0].kind is EventKind.OTHER
    )
    assert normalise_line('{"type": "stream_event", "event": {}}')[0].kind is EventKind.OTHER
    assert normalise_line('{"type": "assistant", "message": "odd"}')[0].kind is EventKind.OTHER
    assert normalise_line("") == []


def test_tool_calls_and_results_carry_names_ids_and_errors() -> None:
    call = normalise_line(
        json.dumps(
            {
                "type": "assistant",
                "message": {
                    "content": [
                        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
                    ],
                    "usage": {
                        "input_tokens": 10,
                        "cache_read_input_tokens": 90,
                        "output_tokens": 3,
                    },
                },
            }
        )
    )
    assert call[0].tool == "Bash" and call[0].args == {"command": "ls"}
    assert call[1].kind is EventKind.USAGE and call[1].input_tokens == 100
    res = normalise_line(
        json.dumps(
            {
                "type": "user",
                "message": {
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "is_error": True,
                            "content": [{"type": "text", "text": "No such file"}],
                        }
                    ]
                },
            }
        )
    )
    assert res[0].tool_id == "t1" and res[0].is_error and res[0].error == "No such file"
