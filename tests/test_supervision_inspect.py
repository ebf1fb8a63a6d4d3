"""`worker inspect TRANSCRIPT`: recorded transcripts of real CLIs, and one written per anomaly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worker.cli.app import app
from worker.errors import WorkerError
from worker.supervision.formats import detect_format, read_text
from worker.supervision.postmortem import replay
from worker.supervision.settings import SupervisionSettings

from .test_supervision_kit import RECORDED, WRITTEN, Stream

runner = CliRunner()


def inspect(path: Path, tmp_path: Path, *extra: str) -> dict:
    result = runner.invoke(
        app, ["inspect", str(path), "--workspace", str(tmp_path), "--json", *extra]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def recorded() -> list[Path]:
    return sorted(p for p in RECORDED.iterdir() if p.suffix in (".json", ".jsonl"))


@pytest.mark.parametrize("path", recorded(), ids=lambda p: p.name)
def test_inspect_reads_every_recorded_transcript(path: Path, tmp_path: Path) -> None:
    """Real output of Claude, Codex and Gemini CLIs: the format is recognised from the file,
    events are read, and none of these short healthy runs is called an anomaly."""
    data = inspect(path, tmp_path)
    assert data["format"] == path.name.split("-")[0]
    assert data["events"] >= 1 and data["findings"] == [] and data["stop"] is None
    text = runner.invoke(app, ["inspect", str(path), "-w", str(tmp_path)])
    assert text.exit_code == 0 and "no anomalies" in text.stdout


def test_the_session_log_with_tool_errors_and_compaction(tmp_path: Path) -> None:
    """The Claude session log: tool calls matched to results, two tool errors counted."""
    data = inspect(RECORDED / "claude-session-main-with-compaction.jsonl", tmp_path)
    assert data["tool_calls"] == 10 and data["tool_failures"] == 2
    assert data["model"] and data["peak_context_fill"] < 0.8


def test_the_1m_session_model_sets_the_window(tmp_path: Path) -> None:
    data = inspect(RECORDED / "claude-stream-rate-limit-overage-rejected.jsonl", tmp_path)
    assert data["model"] == "claude-opus-4-6[1m]" and data["peak_context_fill"] < 0.02


# Written transcripts (tests/fixtures/transcripts_supervision/): file -> (kind, start event).
WRITTEN_CASES = {
    "claude-loop.jsonl": ("loop", 4),
    "claude-repeated-error.jsonl": ("repeated_error", 4),
    "claude-repeated-message.jsonl": ("repeated_message", 1),
    "claude-oscillation.jsonl": ("oscillation", 1),
    "claude-cascade.jsonl": ("cascade", 1),
    "claude-permission.jsonl": ("permission", 1),
    "claude-infrastructure.jsonl": ("infrastructure", 1),
    "claude-context.jsonl": ("context", 5),
    "codex-loop.jsonl": ("loop", 3),
    "gemini-loop.jsonl": ("loop", 1),
}


@pytest.mark.parametrize(("name", "expected"), WRITTEN_CASES.items(), ids=list(WRITTEN_CASES))
def test_inspect_finds_the_anomaly_each_written_transcript_shows(
    name: str, expected: tuple[str, int], tmp_path: Path
) -> None:
    """Each anomaly kind, where its pattern starts, and the steering it would have given."""
    kind, start = expected
    data = inspect(WRITTEN / name, tmp_path)
    first = next(f for f in data["findings"] if f["kind"] == kind)
    assert first["start_event"] == start
    assert first["steering"].startswith("[SUPERVISOR] ")
    assert first["suppressed"] is False
    text = runner.invoke(app, ["inspect", str(WRITTEN / name), "-w", str(tmp_path)]).stdout
    assert f"event {start} (line {first['start_line']}): {kind}" in text
    assert first["steering"] in text


def test_reading_32_different_files_is_research_not_a_stall(tmp_path: Path) -> None:
    """Issue 19: every read brings new information, so a read-only run never stalls (this
    transcript was a stall before progress meant more than a file change)."""
    data = inspect(WRITTEN / "claude-stall.jsonl", tmp_path)
    assert data["tool_calls"] >= 30 and data["findings"] == []


def test_a_healthy_written_transcript_has_no_findings(tmp_path: Path) -> None:
    data = inspect(WRITTEN / "claude-normal.jsonl", tmp_path)
    assert data["findings"] == [] and data["tool_calls"] == 3 and data["pace"] == "primary"


def test_inspect_says_where_a_tight_loop_would_have_been_cut_short(tmp_path: Path) -> None:
    data = inspect(WRITTEN / "claude-loop.jsonl", tmp_path)
    levels = [(f["kind"], f["level"], f["count"]) for f in data["findings"]]
    assert levels == [("loop", "warn", 3), ("loop", "urgent", 5)]
    assert data["findings"][0]["peak"] == 4 and data["findings"][1]["peak"] == 7
    assert data["stop"]["reason"].startswith("supervisor emergency: Loop: you called Bash")
    assert data["stop"]["event"] >= data["findings"][1]["detected_event"]


def test_inspect_uses_the_workspace_thresholds(tmp_path: Path) -> None:
    """worker.toml's `[supervision]` applies to post-mortems too (here: loops warn at 6)."""
    (tmp_path / "worker.toml").write_text("[supervision.thresholds.loop]\nwarn = 6\nurgent = 9\n")
    data = inspect(WRITTEN / "claude-loop.jsonl", tmp_path)
    assert [(f["kind"], f["count"]) for f in data["findings"]] == [("loop", 6)]
    assert data["stop"] is None


def test_the_format_can_be_forced_when_the_content_agrees(tmp_path: Path) -> None:
    data = inspect(WRITTEN / "codex-loop.jsonl", tmp_path, "--format", "codex")
    assert data["format"] == "codex" and data["tool_calls"] > 0


def test_a_format_the_content_contradicts_is_a_data_error(tmp_path: Path) -> None:
    """Issue 19: a Codex transcript read as Claude replayed as "nothing happened"; now it is
    exit 65 naming the format the content is in."""
    path = WRITTEN / "codex-loop.jsonl"
    result = runner.invoke(app, ["inspect", str(path), "-w", str(tmp_path), "--format", "claude"])
    assert isinstance(result.exception, WorkerError) and result.exception.exit_code == 65
    assert "this is a codex transcript, not claude" in str(result.exception)


def test_a_missing_transcript_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["inspect", str(tmp_path / "nope.jsonl"), "-w", str(tmp_path)])
    assert result.exit_code != 0
    assert "nope.jsonl not found" in str(result.exception)


def test_lines_that_are_not_json_are_counted_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    lines = (WRITTEN / "claude-loop.jsonl").read_text().splitlines()
    path.write_text("\n".join([lines[0], "garbage {", *lines[1:], "\x00\xff"]) + "\n")
    data = inspect(path, tmp_path)
    assert data["errors"] == 2 and data["findings"]


def test_format_detection() -> None:
    assert detect_format(['{"type":"thread.started","thread_id":"x"}']) == "codex"
    assert detect_format(['{"type":"init","model":"gemini-2.5-pro"}', '{"type":"tool_use"}']) == (
        "gemini"
    )
    assert detect_format(['{"type":"system","subtype":"init"}']) == "claude"
    assert detect_format(['{"id":1,"source":"agent","action":"run","args":{}}']) == "openhands"
    assert detect_format(["not json"]) is None


def test_gemini_message_deltas_are_joined_into_one_message() -> None:
    text = "\n".join(
        json.dumps(o)
        for o in [
            {"type": "init", "model": "gemini-2.5-pro", "session_id": "s"},
            {"type": "message", "role": "assistant", "content": "Hel", "delta": True},
            {"type": "message", "role": "assistant", "content": "lo.", "delta": True},
            {"type": "result", "status": "success", "stats": {}},
        ]
    )
    fmt, events = read_text(text)
    assert fmt == "gemini"
    assert [e.text for e in events if e.kind.value == "text"] == ["Hello."]


def test_replay_is_linear_over_a_long_generated_stream() -> None:
    """20,000 events of mixed work replay in one pass with bounded findings (the benchmark,
    bench/bench_supervision.py, measures the time)."""
    stream = Stream().session()
    for i in range(5000):
        stream.tool("Read", {"file_path": f"f{i % 7}.py"})
        if i % 10 == 0:
            stream.tool("Edit", {"file_path": f"f{i}.py"})
    report = replay(iter(stream.events), SupervisionSettings())
    assert report.events == len(stream.events) and report.tool_calls == 5500
    assert len(report.findings) < 50
