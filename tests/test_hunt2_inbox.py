"""Hunted inbox bugs (second round): a message caught while its writer is still writing it is
left for a later run, not quarantined and lost to its task."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worker.cli.app import app
from worker.config import load_settings
from worker.run.runner import run_once
from worker.sources import message as inbox_read

from .conftest import FakeAgent

pytestmark = pytest.mark.usefixtures("only_the_task")


def _message(msg_id: str) -> bytes:
    data = {"to": "test-machine", "id": msg_id, "from": "alice", "subject": "s", "body": "b"}
    return json.dumps(data).encode()


@pytest.mark.parametrize("written", [0, 40], ids=["empty", "half"])
def test_a_message_a_run_finds_half_written_runs_once_its_writer_is_done(
    workspace: Path, fake_claude: FakeAgent, written: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sender writes its message in place (`echo ... > inbox/m.json`, not a temporary file
    renamed): a run started by cron in the middle finds a file that is not yet JSON. It leaves
    the young file alone (with a reason in the listing), and once the writer has finished,
    the next run takes the message; nothing is quarantined."""
    now = [0.0]  # the runs are minutes apart: the second reads the folder afresh
    monkeypatch.setattr(inbox_read, "_clock", lambda: now[0])
    path = workspace / "inbox" / "m.json"
    body = _message("m")
    with path.open("wb") as writer:
        writer.write(body[:written])
        writer.flush()
        first = run_once(load_settings(workspace))
        writer.write(body[written:])
    assert first.task_id is None
    assert not (workspace / "inbox" / "rejected").exists()
    now[0] += 60
    second = run_once(load_settings(workspace))
    assert (second.task_id, second.outcome.value) == ("m", "success")


def test_a_bad_message_older_than_a_writer_takes_is_still_quarantined_with_its_reason(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """The wait is only for young files: a broken message last written a minute ago is moved
    to `rejected/` with its reason, and the run goes on with the good one."""
    (workspace / "inbox" / "bad.json").write_bytes(_message("bad")[:-2])
    os.utime(workspace / "inbox" / "bad.json", (time.time() - 60, time.time() - 60))
    (workspace / "inbox" / "good.json").write_bytes(_message("good"))
    report = run_once(load_settings(workspace))
    assert (report.task_id, report.outcome.value) == ("good", "success")
    reason = (workspace / "inbox" / "rejected" / "bad.json.reason.txt").read_text()
    assert "invalid message" in reason


def test_a_message_marked_unread_in_any_case_runs_and_one_already_read_is_listed_as_passed_over(
    workspace: Path, fake_claude: FakeAgent, cli: CliRunner
) -> None:
    """A person writing a message by hand may type `"status": "Unread"`: it is unread. One of
    ours with another status is left where it is, and `worker queue` says why."""
    for msg_id, status in (("by-hand", "Unread"), ("seen", "read")):
        data = json.loads(_message(msg_id))
        (workspace / "inbox" / f"{msg_id}.json").write_text(json.dumps({**data, "status": status}))
    queue = cli.invoke(app, ["queue", "--workspace", str(workspace)])
    assert queue.exit_code == 0, queue.output
    assert "seen\tinbox\t\tpassed over: its status is not `unread`: read" in queue.stdout
    report = run_once(load_settings(workspace))
    assert report.task_id == "by-hand" and report.outcome.value == "success"
    assert (workspace / "inbox" / "seen.json").exists()
