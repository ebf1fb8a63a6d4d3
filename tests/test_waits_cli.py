"""`worker waits ...`, `worker intercom send` and `worker status` through the real CLI:
exit codes, stdout and stderr apart, text and `--json`."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.conftest import run_worker, write_message
from tests.test_waits_conditions import make_wait
from worker.cli.app import app
from worker.config import Settings, load_settings
from worker.waits.state import file_name


@pytest.fixture
def settings(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    return load_settings(workspace)


def cli(ws: Path, *args: str) -> Any:
    return CliRunner().invoke(app, [*args, "--workspace", str(ws)])


def test_list_and_show_in_text_and_json(settings: Settings) -> None:
    ws = settings.workspace
    assert cli(ws, "waits", "list").stdout.strip() == "no task is waiting"
    make_wait(settings, "owner/repo#12", "github_decision", source="github")
    make_wait(settings, "msg-1", "user_approval", age_s=3600)
    data = json.loads(cli(ws, "waits", "list", "--json").stdout)
    assert [w["task_id"] for w in data["waits"]] == ["msg-1", "owner/repo#12"]  # oldest first
    text = cli(ws, "waits", "list").stdout
    row = text.splitlines()[1].split("\t")
    assert row[:2] == ["msg-1", "an approval: an answer"]
    assert row[2].endswith("UTC (60 min ago)") and row[4:] == ["no", "not yet"]
    # words and readable times, not raw values
    assert "False" not in text and not re.search(r"\dT\d", text)
    shown = json.loads(cli(ws, "waits", "show", "owner/repo#12", "--json").stdout)
    assert shown["file"] == file_name("owner/repo#12") and shown["state"]["resumeWhen"] == (
        "github_decision"
    )
    missing = run_worker(ws, "waits", "show", "nope")
    assert missing.returncode == 2 and "no wait state 'nope'" in missing.stderr
    assert missing.stdout == ""


def test_approve_by_someone_not_listed_is_refused(settings: Settings) -> None:
    make_wait(settings, "msg-2", "user_approval", approvers=["alice"])
    refused = run_worker(settings.workspace, "waits", "approve", "msg-2", "--by", "mallory")
    assert refused.returncode == 2 and "APPROVER_NOT_ALLOWED" in refused.stderr
    assert not (settings.state / "intercom" / "msg-2").exists()
    ok = cli(settings.workspace, "waits", "approve", "msg-2", "--by", "alice", "--note", "fine")
    assert ok.exit_code == 0 and "approval of msg-2 noted" in ok.stdout


def test_approve_a_wait_for_something_else_is_refused(settings: Settings) -> None:
    make_wait(settings, "msg-3", "roosync_response")
    result = run_worker(settings.workspace, "waits", "approve", "msg-3")
    assert result.returncode == 2 and "waits for roosync_response" in result.stderr


def test_reject_and_intercom_send_write_notes(settings: Settings) -> None:
    make_wait(settings, "msg-4", "user_approval")
    assert cli(settings.workspace, "waits", "reject", "msg-4", "--note", "no").exit_code == 0
    sent = cli(settings.workspace, "intercom", "send", "msg-5", "hello", "--force", "--json")
    assert sent.exit_code == 0 and json.loads(sent.stdout)["task_id"] == "msg-5"
    shown = json.loads(cli(settings.workspace, "waits", "show", "msg-4", "--json").stdout)
    assert [n["kind"] for n in shown["notes"]] == ["rejection"]
    assert "APPROVAL_NOTED" in [e["code"] for e in shown["log"]]
    notes = settings.state / "intercom" / "msg-5"
    assert json.loads(next(notes.glob("*.json")).read_text())["text"] == "hello"


def test_cancel_reports_to_the_source_and_moves_the_file(settings: Settings) -> None:
    write_message(settings.workspace, "msg-6")
    (settings.inbox / "msg-6.json").rename(settings.inbox / "done.json")
    (settings.inbox / "done").mkdir()
    (settings.inbox / "done.json").rename(settings.inbox / "done" / "msg-6.json")
    make_wait(settings, "msg-6", "user_approval", source="inbox", sourceRef={"file": "msg-6.json"})
    result = cli(settings.workspace, "waits", "cancel", "msg-6", "--reason", "not needed", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["outcome"] == "cancelled"
    assert (settings.wait_states / "cancelled" / "msg-6.json").exists()
    reply = json.loads((settings.inbox / "outbox" / "msg-6-cancelled-reply.json").read_text())
    assert reply["to"] == "alice" and "not needed" in reply["body"]


def test_prune_expires_now(settings: Settings) -> None:
    make_wait(settings, "msg-7", "user_approval", expiresAt=datetime.now(UTC) - timedelta(1))
    make_wait(settings, "msg-8", "user_approval")
    data = json.loads(cli(settings.workspace, "waits", "prune", "--json").stdout)
    assert data["expired"] == ["msg-7"] and data["waiting"] == 1


def test_status_at_a_glance(settings: Settings) -> None:
    make_wait(settings, "msg-9", "intercom_message", age_s=7200)
    result = run_worker(settings.workspace, "status")
    assert result.returncode == 0, result.stderr
    assert "waiting: 1" in result.stdout
    row = next(r for r in result.stdout.splitlines() if r.startswith("msg-9")).split("\t")
    assert row[:2] == ["msg-9", "a local message: an answer"]
    assert row[-2] == "2.0 h" and row[-1] == "no"
    data = json.loads(run_worker(settings.workspace, "status", "--json").stdout)
    assert data["waiting"][0]["task_id"] == "msg-9" and data["last_run"] is None


def test_approval_and_message_reach_a_wait_file_named_unlike_its_task(settings: Settings) -> None:
    """The specification's tool may name its files freely (`wait-msg-20.json` for task
    `msg-20`): `waits approve` and `intercom send` write where phase 0 reads that wait."""
    from worker.state.store import Store
    from worker.waits import phase0

    settings.wait_states.mkdir(parents=True, exist_ok=True)
    for name, task_id, when in (
        ("wait-msg-20.json", "msg-20", "user_approval"),
        ("wait-msg-21.json", "msg-21", "intercom_message"),
    ):
        spec = {
            "taskId": task_id,
            "timestamp": (datetime.now(UTC) - timedelta(minutes=5)).isoformat(),
            "reason": "r",
            "waitFor": "w",
            "resumeWhen": when,
            "context": {"mode": "code-simple", "model": "haiku", "iteration": 1},
        }
        (settings.wait_states / name).write_text(json.dumps(spec), encoding="utf-8")
        assert cli(settings.workspace, "waits", "adopt", name).exit_code == 0
    assert cli(settings.workspace, "waits", "approve", "msg-20", "--note", "go").exit_code == 0
    assert cli(settings.workspace, "intercom", "send", "msg-21", "use staging").exit_code == 0
    shown = json.loads(cli(settings.workspace, "waits", "show", "msg-20", "--json").stdout)
    assert [n["kind"] for n in shown["notes"]] == ["approval"]
    with Store(settings.db_path) as store:
        ready = {w.task.id: w.answer for w in phase0.scan(settings, store).ready}
    assert "Note: go" in ready["msg-20"] and "use staging" in ready["msg-21"]


def test_wait_file_names_never_collide() -> None:
    """`a/b` and `a_b` are different tasks: their wait states are different files."""
    assert file_name("a/b") != file_name("a_b")
    assert file_name("msg-1") == "msg-1.json"
    assert file_name("owner/repo#12").startswith("owner_repo_12-")
