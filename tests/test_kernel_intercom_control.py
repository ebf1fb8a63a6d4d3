"""Control orders from the local intercom: a note starting `/stop`, `/cancel`, `/pause` or
`/resume` is an order for its task (obeyed once, never a wait's answer); any other note is a
message, as before."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import FakeAgent
from tests.test_waits_conditions import make_wait, ready_ids, scan
from worker.cli.app import app
from worker.config import Settings, load_settings
from worker.kernel import control, db
from worker.kernel.model import Order
from worker.kernel.orders import read_orders
from worker.kernel.watcher import StopWatcher
from worker.models import Outcome, Task, TaskResult
from worker.run.runner import RunOptions, run_once
from worker.state.store import Store
from worker.waits import intercom


@pytest.fixture
def settings(workspace: Path) -> Settings:
    """Read after `fake_claude` where a test asks for both (its `claude` is an env setting)."""
    return load_settings(workspace, fallback={"enabled": False})


def send(settings: Settings, task: str, text: str) -> dict[str, object]:
    """`worker intercom send TASK TEXT --json` through the real CLI (--force: these tasks
    exist only in the test, not in the workspace)."""
    result = CliRunner().invoke(
        app,
        ["intercom", "send", task, text, "--force", "--json", "-w", str(settings.workspace)],
    )
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads(result.stdout)
    return data


def unread(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/stop", (Order.STOP, "")),
        ("  /CANCEL wrong repo ", (Order.CANCEL, "wrong repo")),
        ("/pause\nback after lunch", (Order.PAUSE, "back after lunch")),
        ("/resume", (Order.RESUME, "")),
        ("/stopper", None),
        ("please /stop", None),
        ("/approve", None),
        ("", None),
    ],
)
def test_the_first_word_makes_the_order(text: str, expected: object) -> None:
    assert control.order_of_text(text) == expected


def test_pause_note_pauses_a_waiting_task_and_is_never_its_answer(
    fake_claude: FakeAgent, settings: Settings
) -> None:
    """`/pause` on a task waiting for a message pauses it (the note is not the message it
    waited for); a plain note then makes it ready but it stays paused; `/resume` lets it go
    on with the plain note as its answer."""
    make_wait(settings, "msg-7", "intercom_message")
    sent = send(settings, "msg-7", "/pause back after lunch")
    assert sent["order"] == "pause"
    first = run_once(settings, RunOptions())
    assert first.outcome is Outcome.IDLE, first
    assert {"SAFETY_OVERRIDE", "PAUSED_ON_ORDER"} <= set(first.reason_codes)
    assert "WAIT_STATE_RESUMED" not in first.reason_codes
    note = Path(str(sent["note"]))
    assert not note.exists() and (note.parent / "done" / note.name).exists()  # consumed once
    with Store(settings.db_path) as store:
        assert db.paused_ids(store) == {"msg-7"}
    plain = send(settings, "msg-7", "use the staging database")
    assert plain["order"] is None
    second = run_once(settings, RunOptions())
    assert second.outcome is Outcome.IDLE and "TASK_PAUSED" in second.reason_codes
    assert "PAUSED_ON_ORDER" not in second.reason_codes  # the pause note is not read again
    send(settings, "msg-7", "/resume")
    third = run_once(settings, RunOptions())
    assert (third.task_id, third.outcome) == ("msg-7", Outcome.SUCCESS), third
    assert {"RESUMED_ON_ORDER", "WAIT_STATE_RESUMED"} <= set(third.reason_codes)
    stdin = fake_claude.task_calls[-1]["stdin"]
    assert "use the staging database" in stdin
    assert "/resume" not in stdin and "back after lunch" not in stdin


def test_pause_note_pauses_a_running_task(settings: Settings) -> None:
    task = Task("msg-8", "inbox", "T")
    stop = threading.Event()
    watcher = StopWatcher(settings, task, stop)
    assert not watcher.check()
    sent = send(settings, "msg-8", "/pause until the release")
    assert watcher.check() and stop.is_set()
    paused = watcher.settle(TaskResult(task, Outcome.STOPPED, session_id="s-8"), "code-simple")
    assert paused.outcome is Outcome.WAITING and paused.wait_state is not None
    assert "until the release" in paused.reason
    note = Path(str(sent["note"]))
    assert not note.exists() and (note.parent / "done" / note.name).exists()


def test_cancel_note_from_the_cli_stops_a_running_task(settings: Settings) -> None:
    with Store(settings.db_path) as store:  # the running task's claim: how the CLI knows it
        store.claim("msg-9", "inbox", settings.machine_id, 1, 60.0)
    result = CliRunner().invoke(
        app,
        ["intercom", "send", "msg-9", "/cancel not needed", "--workspace", str(settings.workspace)],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("cancel order for msg-9 written: ")
    task = Task("msg-9", "inbox", "T")
    watcher = StopWatcher(settings, task, threading.Event())
    assert watcher.check()
    done = watcher.settle(TaskResult(task, Outcome.STOPPED), "code-simple")
    assert done.outcome is Outcome.CANCELLED and "cancel by intercom: not needed" in done.reason
    assert read_orders(settings) == []  # consumed: obeyed once


def test_a_plain_note_still_resumes_an_intercom_message_wait(settings: Settings) -> None:
    """Beside an order note, the ordinary note is the wait's answer, and only it is consumed
    with the resume."""
    path = make_wait(settings, "msg-10", "intercom_message")
    order = intercom.write_note(settings, "msg-10", "message", "/stop")
    plain = intercom.write_note(settings, "msg-10", "message", "the answer is 42")
    answer = ready_ids(scan(settings))["msg-10"]
    assert "the answer is 42" in answer and "/stop" not in answer
    path.unlink()  # the resumed run ended
    assert scan(settings).consumed == 1
    assert not plain.exists() and order.exists()  # the order waits for the kernel


def test_a_named_sender_follows_the_approvers_list(workspace: Path) -> None:
    """A hand-written note with `by`: with approvers listed only they may order; the local
    user (no `by`) always may."""
    settings = load_settings(workspace, waits={"approvers": ["carol"]})
    folder = intercom.folder_for(settings, "msg-11")
    intercom.write_note(settings, "msg-11", "message", "/stop", by="mallory")
    intercom.write_note(settings, "msg-11", "message", "/pause", by="carol")
    intercom.write_note(settings, "msg-11", "message", "/resume")
    orders = {o.order: o for o in read_orders(settings)}
    assert not orders[Order.STOP].trusted and orders[Order.STOP].sender == "mallory"
    assert orders[Order.PAUSE].trusted and orders[Order.RESUME].trusted
    assert orders[Order.RESUME].sender == "the local user"
    assert {o.task_id for o in orders.values()} == {"msg-11"}
    assert len(unread(folder)) == 3  # reading consumes nothing
