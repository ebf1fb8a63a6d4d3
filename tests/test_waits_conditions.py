"""Phase 0 condition by condition: each one ready and not ready, strangers ignored, expiry,
throttling, quarantine. Driven through `phase0.scan` on a real workspace and SQLite store."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from worker.config import Settings, load_settings
from worker.sources.message import write_message as write_inbox
from worker.state.store import Store
from worker.waits import authored, intercom, phase0
from worker.waits.ledger import Ledger
from worker.waits.record import save_wait
from worker.waits.state import WaitState

NOW = datetime.now(UTC)


def make_wait(
    settings: Settings, task_id: str, resume_when: str, *, age_s: float = 60, **fields: Any
) -> Path:
    """Save a wait state that began `age_s` seconds ago (worker's own format)."""
    data: dict[str, Any] = {
        "taskId": task_id,
        "timestamp": datetime.now(UTC) - timedelta(seconds=age_s),
        "reason": "needs a human",
        "waitFor": "an answer",
        "resumeWhen": resume_when,
        "context": {
            "mode": "code-simple",
            "model": "haiku",
            "iteration": 2,
            "outputSnippet": "...",
        },
        **fields,
    }
    return save_wait(settings, WaitState.model_validate(data))


@pytest.fixture
def settings(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    return load_settings(workspace)


def scan(settings: Settings, **kw: Any) -> phase0.WaitScan:
    with Store(settings.db_path) as store:
        return phase0.scan(settings, store, **kw)


def ready_ids(result: phase0.WaitScan) -> dict[str, str]:
    return {w.task.id: w.answer for w in result.ready}


def log_codes(settings: Settings, task_id: str) -> list[str]:
    with Store(settings.db_path) as store:
        return [row["code"] for row in Ledger(store).log_of(task_id)]


def test_time_ready_only_once_the_moment_has_passed(settings: Settings) -> None:
    make_wait(settings, "t-past", "time", resumeAt=NOW - timedelta(seconds=1))
    make_wait(settings, "t-future", "time", resumeAt=NOW + timedelta(hours=1))
    make_wait(settings, "t-inline", f"time:{(NOW - timedelta(minutes=1)).isoformat()}")
    result = scan(settings)
    assert set(ready_ids(result)) == {"t-past", "t-inline"}
    assert result.pending == 1


def test_intercom_message_ready_with_the_text_and_consumed_after_the_resume(
    settings: Settings,
) -> None:
    path = make_wait(settings, "msg-7", "intercom_message")
    assert ready_ids(scan(settings)) == {}
    note = intercom.write_note(settings, "msg-7", "message", "use the staging database")
    answer = ready_ids(scan(settings))["msg-7"]
    assert "use the staging database" in answer
    assert note.exists()  # not consumed before the resumed run has ended
    path.unlink()  # what the runner does once the resumed run ended
    result = scan(settings)
    assert result.consumed == 1 and not note.exists()
    assert (note.parent / "done" / note.name).exists()


def test_roosync_response_matches_in_reply_to_or_thread_only_for_this_machine(
    settings: Settings,
) -> None:
    make_wait(settings, "msg-a", "roosync_response")
    make_wait(settings, "msg-b", "roosync_response", sourceRef={"thread_id": "thread-b"})
    make_wait(settings, "msg-c", "roosync_response")
    inbox = settings.inbox
    base = {"from": "other-machine", "to": "test-machine", "status": "unread"}
    write_inbox(inbox, {**base, "id": "r1", "in_reply_to": "msg-a", "body": "yes, go ahead"})
    write_inbox(inbox, {**base, "id": "r2", "thread_id": "thread-b", "body": "answer b"})
    write_inbox(
        inbox, {**base, "id": "r3", "to": "elsewhere", "in_reply_to": "msg-c", "body": "not for us"}
    )
    write_inbox(inbox, {**base, "id": "r4", "status": "read", "in_reply_to": "msg-c"})
    ready = ready_ids(scan(settings))
    assert set(ready) == {"msg-a", "msg-b"}
    assert "yes, go ahead" in ready["msg-a"] and "answer b" in ready["msg-b"]


def test_user_approval_local_ready_after_the_wait_began(settings: Settings) -> None:
    make_wait(settings, "msg-ok", "user_approval")
    assert ready_ids(scan(settings)) == {}
    intercom.write_note(settings, "msg-ok", "approval", "ship it")
    answer = ready_ids(scan(settings))["msg-ok"]
    assert answer.startswith("Approved by the local user") and "ship it" in answer


def test_rejection_is_an_answer_too(settings: Settings) -> None:
    make_wait(settings, "msg-no", "user_approval")
    intercom.write_note(settings, "msg-no", "rejection", "too risky", by=None)
    answer = ready_ids(scan(settings))["msg-no"]
    assert answer.startswith("Rejected by the local user") and "Do not carry out" in answer


def test_approval_by_a_stranger_is_ignored_and_logged(settings: Settings) -> None:
    make_wait(settings, "msg-s", "user_approval", approvers=["alice"])
    intercom.write_note(settings, "msg-s", "approval", "sure", by="mallory")
    assert ready_ids(scan(settings)) == {}
    assert "APPROVER_NOT_ALLOWED" in log_codes(settings, "msg-s")
    intercom.write_note(settings, "msg-s", "approval", "yes", by="alice")
    assert "Approved by alice" in ready_ids(scan(settings))["msg-s"]


def test_an_approval_older_than_the_wait_does_not_count(settings: Settings) -> None:
    note = intercom.write_note(settings, "msg-old", "approval", "stale")
    data = json.loads(note.read_text())
    data["created_at"] = (NOW - timedelta(days=1)).isoformat()
    note.write_text(json.dumps(data))
    authored.sign(settings, note.read_bytes(), "approval")  # as if the CLI wrote it a day ago
    make_wait(settings, "msg-old", "user_approval")
    assert ready_ids(scan(settings)) == {}
    assert "APPROVAL_BEFORE_WAIT" in log_codes(settings, "msg-old")


def test_inbox_approval_needs_a_listed_sender(settings: Settings) -> None:
    make_wait(settings, "msg-i", "user_approval", approvers=["boss-machine"])
    base = {"to": "test-machine", "status": "unread", "in_reply_to": "msg-i"}
    write_inbox(settings.inbox, {**base, "id": "x1", "from": "intruder", "body": "/approve"})
    assert ready_ids(scan(settings)) == {}
    write_inbox(
        settings.inbox, {**base, "id": "x2", "from": "boss-machine", "body": "/approve fine by me"}
    )
    assert "fine by me" in ready_ids(scan(settings))["msg-i"]


def test_expired_waits_are_reported_and_moved_aside(settings: Settings) -> None:
    write_inbox(settings.inbox, {"id": "msg-e", "from": "alice", "to": "test-machine"})
    make_wait(settings, "msg-e", "user_approval", age_s=8 * 86400, source="inbox")
    make_wait(settings, "msg-live", "user_approval")
    result = scan(settings)
    assert result.expired == ["msg-e"] and result.pending == 1
    assert (settings.wait_states / "expired" / "msg-e.json").exists()
    assert not (settings.wait_states / "msg-e.json").exists()
    reply = json.loads((settings.inbox / "outbox" / "msg-e-expired-reply.json").read_text())
    assert reply["to"] == "alice" and "Outcome: expired" in reply["body"]
    assert "WAIT_EXPIRED" in log_codes(settings, "msg-e")


def test_expiry_follows_the_setting_for_spec_files_without_one(settings: Settings) -> None:
    make_wait(settings, "spec-like", "user_approval", age_s=3 * 86400)
    (settings.wait_states / "spec-like.json").write_text(
        json.dumps(
            {
                k: v
                for k, v in json.loads(
                    (settings.wait_states / "spec-like.json").read_text()
                ).items()
                if k != "expiresAt"
            }
        )
    )
    assert scan(settings, now=NOW + timedelta(days=3)).expired == []
    assert scan(settings, now=NOW + timedelta(days=5)).expired == ["spec-like"]


def test_a_corrupt_file_is_quarantined_and_the_others_still_resume(settings: Settings) -> None:
    """Files worker did not write, readable or not, are set aside with their reason."""
    make_wait(settings, "good", "time", resumeAt=NOW - timedelta(seconds=5))
    (settings.wait_states / "broken.json").write_text("{not json")
    (settings.wait_states / "partial.json").write_text(json.dumps({"taskId": "p"}))
    result = scan(settings)
    assert set(ready_ids(result)) == {"good"} and len(result.errors) == 2
    rejected = settings.wait_states / "rejected"
    assert (rejected / "broken.json").exists()
    assert "WAIT_STATE_UNRECORDED" in (rejected / "partial.json.reason.txt").read_text()


def test_dry_run_changes_nothing(settings: Settings) -> None:
    make_wait(settings, "old", "user_approval", age_s=30 * 86400)
    (settings.wait_states / "broken.json").write_text("{")
    result = phase0.scan(settings, None, dry_run=True)
    assert result.errors and (settings.wait_states / "broken.json").exists()
    assert (settings.wait_states / "old.json").exists()


def test_an_unknown_condition_read_from_a_file_is_quarantined_naming_resume_when(
    settings: Settings,
) -> None:
    """`resumeWhen: banana` would never resume: the file is set aside with its reason, and a
    good wait beside it still resumes."""
    make_wait(settings, "good", "time", resumeAt=NOW - timedelta(seconds=5))
    good = json.loads((settings.wait_states / "good.json").read_text())
    (settings.wait_states / "odd.json").write_text(
        json.dumps({**good, "taskId": "odd", "resumeWhen": "banana"})
    )
    result = scan(settings)
    assert set(ready_ids(result)) == {"good"}
    reason = (settings.wait_states / "rejected" / "odd.json.reason.txt").read_text()
    assert "resumeWhen" in reason and "banana" in reason
