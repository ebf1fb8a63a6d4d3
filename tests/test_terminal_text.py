"""The agent's text never drives the operator's terminal: control characters in a STATUS reason
(an OSC 52 clipboard write, a window title, a clear screen, a carriage return that overwrites
the line, a right-to-left override) come out made visible in the live run output, `show`,
`log`, `why` and warnings, through the one rendering layer (worker/cli/ui.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FakeAgent, run_worker, write_message
from worker.cli import ui
from worker.humanize import visible

OSC52 = "\x1b]52;c;aGVsbG8=\x07"  # puts "hello" on the clipboard
TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J\x1b[H"
REASON = f"done{OSC52}{TITLE}{CLEAR}\u202eevil\rfake line"  # the STATUS line ends at \r
RAW = ("\x1b", "\x07", "\r", "\u202e")


def _no_raw_control(text: str) -> None:
    for char in RAW:
        assert char not in text, f"{char!r} reached the terminal"


@pytest.fixture
def finished_run(workspace: Path, fake_claude: FakeAgent) -> tuple[Path, str]:
    """A task whose agent ended with the escapes in its STATUS reason; the run's own output."""
    fake_claude.answers({"status": "success", "reason": REASON})
    write_message(workspace, "msg-esc", subject=f"subject{TITLE}")
    done = run_worker(workspace, "run")
    assert done.returncode == 0, done.stderr
    return workspace, done.stdout + done.stderr


def test_the_live_run_output_shows_the_escapes(finished_run: tuple[Path, str]) -> None:
    _, output = finished_run
    _no_raw_control(output)
    assert "\\x1b]52;c;aGVsbG8=\\x07" in output


def test_show_log_and_why_show_the_escapes(finished_run: tuple[Path, str]) -> None:
    ws, _ = finished_run
    shown = run_worker(ws, "show", "msg-esc")
    assert shown.returncode == 0, shown.stderr
    _no_raw_control(shown.stdout)
    assert "\\x1b]0;pwned\\x07" in shown.stdout and "\\x1b[2J" in shown.stdout
    assert "\\x1b[H\\u202eevil" in shown.stdout
    for args in (["log"], ["why"]):
        said = run_worker(ws, *args)
        assert said.returncode == 0, said.stderr
        _no_raw_control(said.stdout + said.stderr)
    logged = run_worker(ws, "log").stdout
    assert "\\x1b" in logged, "the log shows the task's subject with its escape visible"


def test_json_output_keeps_the_text_as_data(finished_run: tuple[Path, str]) -> None:
    """`--json` is for programs: the reason is there whole, escaped by JSON itself."""
    ws, _ = finished_run
    shown = run_worker(ws, "show", "msg-esc", "--json")
    _no_raw_control(shown.stdout)
    data = json.loads(shown.stdout)
    assert data["iterations"][-1]["reason"].startswith(f"done{OSC52}")


def test_every_way_ui_prints_makes_controls_visible(capsys: pytest.CaptureFixture[str]) -> None:
    """Lines, warnings, errors and plain tables all pass through it."""
    ui.line(f"line {OSC52}")
    ui.warn(f"warning {TITLE}")
    ui.error(f"error {CLEAR}")
    ui.table([{"reason": REASON}], ["reason"], title=f"title{TITLE}")
    printed = capsys.readouterr()
    _no_raw_control(printed.out + printed.err)
    assert printed.out.count("\\x1b") == 6 and printed.err.count("\\x1b") == 3


def test_visible_keeps_newlines_tabs_and_text() -> None:
    assert visible("a\tb\nc é 日本") == "a\tb\nc é 日本"
    assert visible("\x00\x9b\u2066") == "\\x00\\x9b\\u2066"


def test_a_notification_carries_the_escapes_made_visible(tmp_path: Path) -> None:
    """A notification (a chat message, a webhook a subscriber may print) holds the reason with
    its control characters shown, never raw."""
    from worker.config import load_settings
    from worker.operator.notify import outbox
    from worker.state.store import Store

    settings = load_settings(tmp_path, env={"WORKER_NOTIFY__WEBHOOK__URL": "http://127.0.0.1:9/x"})
    with Store(settings.db_path) as store:
        added = outbox.enqueue(settings, store, "failed", "k", f"title{TITLE}", REASON, "t-1")
        (title, text), *more = store.db.execute("SELECT title, text FROM notify_outbox").fetchall()
    assert added == 1 and not more
    _no_raw_control(title + text)
    assert "\\x1b]52;c;aGVsbG8=\\x07" in text
