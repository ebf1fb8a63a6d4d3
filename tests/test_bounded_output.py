"""Bounded output: a line over the cap is cut with a marker, a log over its cap keeps its head
and its tail, and `run_process` holds neither whole in memory."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from worker.models import AgentEvent, EventKind
from worker.process.boundedio import EVENT_TEXT_CAP, CappedLog, bounded_lines, clip_event
from worker.process.proc import run_process


def test_a_long_line_is_cut_with_a_marker_and_the_next_lines_are_whole() -> None:
    data = b"short\n" + b"x" * 100 + b"\n" + "é-end\n".encode() + b"tail-without-newline"
    lines = list(bounded_lines(io.BytesIO(data), line_cap=10))
    assert lines[0] == "short\n"
    assert lines[1] == "x" * 10 + " [worker: line cut at 10 bytes; 90 more bytes dropped]\n"
    assert lines[2] == "é-end\n"
    assert lines[3].startswith("tail-witho") and "dropped" in lines[3]


def test_lines_across_read_chunks_are_joined() -> None:
    """Reads come in 64 KiB chunks; a line spanning several is one line."""
    line = b"y" * 200_000 + b"\n"
    assert list(bounded_lines(io.BytesIO(line * 2), line_cap=1_000_000)) == [line.decode()] * 2


def test_a_capped_log_keeps_its_head_a_marker_and_its_tail(tmp_path: Path) -> None:
    log = CappedLog(tmp_path / "it.jsonl", cap=4000)
    for n in range(1000):
        log.write(f"line {n:04d} ....\n")
    log.close()
    text = (tmp_path / "it.jsonl").read_text()
    assert len(text.encode()) <= 4000 + 100
    assert text.startswith("line 0000") and text.endswith("line 0999 ....\n")
    assert "bytes of output left out of this log]" in text


def test_a_small_log_is_written_as_is(tmp_path: Path) -> None:
    log = CappedLog(tmp_path / "it.jsonl", cap=4000)
    log.write("a\n")
    log.write("b\n")
    log.close()
    assert (tmp_path / "it.jsonl").read_text() == "a\nb\n"


def test_run_process_cuts_a_huge_line_and_caps_its_log(tmp_path: Path) -> None:
    """20 MB on one line, then a normal one: the handler sees a cut line and the next one;
    the log stays under its cap."""
    script = (
        "import sys\n"
        "for _ in range(20): sys.stdout.write('z' * 2**20)\n"
        "sys.stdout.write('\\nafter\\n')\n"
    )
    seen: list[str] = []
    result = run_process(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        timeout_s=60,
        log_path=tmp_path / "out.log",
        on_line=lambda line: seen.append(line[:20] + f"...{len(line)}") or None,
        line_cap_bytes=2**20,
        log_cap_bytes=3 * 2**20,
    )
    assert result.exit_code == 0
    assert seen[-1] == "after...5" and len(seen) == 2
    assert (tmp_path / "out.log").stat().st_size < 3 * 2**20
    assert "line cut at 1048576 bytes; 19922944 more bytes dropped" in result.stdout


def test_events_keep_a_clipped_text_whose_status_block_survives() -> None:
    """What worker keeps of an event is bounded; the end of a text (the STATUS block) stays."""
    text = "x" * 1_000_000 + "\n=== AGENT STATUS ===\nSTATUS: success\n"
    event = clip_event(AgentEvent(EventKind.TEXT, 0, text=text))
    assert event.text is not None and len(event.text) < EVENT_TEXT_CAP + 100
    assert event.text.endswith("STATUS: success\n") and "characters left out" in event.text
    call = AgentEvent(EventKind.TOOL_CALL, 1, tool="Write", args={"content": "y" * 10**6})
    clipped = clip_event(call).args
    assert clipped is not None and len(clipped["content"]) < EVENT_TEXT_CAP + 100
    small = AgentEvent(EventKind.TEXT, 2, text="hi")
    assert clip_event(small) is small
