"""Hunted inbox bugs: a file name used again while an earlier message of that name is still
claimed loses neither message, and a message saved with a byte order mark is a message."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from worker.config import load_settings
from worker.run.runner import run_once
from worker.sources.inbox import InboxSource
from worker.state.store import Store

from .conftest import FakeAgent, write_message

pytestmark = pytest.mark.usefixtures("only_the_task")


def _drop(workspace: Path, msg_id: str, name: str) -> None:
    """A message written under a file name of the sender's choosing."""
    write_message(workspace, msg_id).rename(workspace / "inbox" / name)


def test_a_new_message_under_a_claimed_messages_file_name_does_not_erase_the_claimed_one(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """A run dies holding `task.json` (message A); the sender drops message B as `task.json`.
    The next run takes B, and once A's lease has run out A comes back and runs too."""
    _drop(workspace, "A", "task.json")
    settings = load_settings(workspace)
    with Store(settings.db_path) as store:  # the run that dies right after its claim
        source = InboxSource(settings, store)
        (task,) = source.list().tasks
        assert source.claim(task, run_id=1)
    _drop(workspace, "B", "task.json")
    assert run_once(settings).task_id == "B"
    with Store(settings.db_path) as store:
        store.db.execute(
            "UPDATE claims SET lease_until = ? WHERE task_id = 'A'", (time.time() - 5,)
        )
    report = run_once(settings)
    assert (report.task_id, report.outcome.value) == ("A", "success")
    done = {json.loads(p.read_text())["id"] for p in (workspace / "inbox" / "done").iterdir()}
    assert done == {"A", "B"}


def test_an_expired_claim_given_back_does_not_overwrite_a_new_message_of_the_same_name(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """Message A (`task.json`) is claimed by a run that dies; message B, for another machine
    of a shared inbox, arrives as `task.json`. Giving A back must keep B."""
    _drop(workspace, "A", "task.json")
    settings = load_settings(workspace)
    with Store(settings.db_path) as store:
        source = InboxSource(settings, store)
        (task,) = source.list().tasks
        assert source.claim(task, run_id=1)
        write_message(workspace, "B", to="other-machine").rename(workspace / "inbox" / "task.json")
        store.db.execute("UPDATE claims SET lease_until = ?", (time.time() - 5,))
        assert source.recover_expired() == ["A"]
    ids = {json.loads(p.read_text())["id"] for p in (workspace / "inbox").glob("*.json")}
    assert ids == {"A", "B"}


def test_a_message_saved_with_a_utf8_byte_order_mark_is_a_task_not_rejected(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """Windows editors and PowerShell 5 (`Out-File -Encoding utf8`) start UTF-8 files with a
    byte order mark; JSON readers may ignore it (RFC 8259, section 8.1). Such a message is
    taken and run, not quarantined as "not JSON"."""
    path = write_message(workspace, "bom")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    report = run_once(load_settings(workspace))
    assert (report.task_id, report.outcome.value) == ("bom", "success")
    assert not (workspace / "inbox" / "rejected").exists()
    assert (workspace / "inbox" / "done" / "bom.json").exists()
