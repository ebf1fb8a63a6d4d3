"""Control orders, staleness and replies through real runs (in process), `worker why` and
`worker cancel` through the CLI."""

from __future__ import annotations

import json
import subprocess
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.conftest import FakeAgent, write_message
from worker.cli.app import app
from worker.config import Settings, load_settings
from worker.errors import UsageError
from worker.kernel.control import control_dir, write_order
from worker.kernel.model import Order
from worker.kernel.watcher import StopWatcher
from worker.models import Outcome, Task, TaskResult
from worker.run.runner import RunOptions, run_once
from worker.state.store import Store
from worker.waits.record import save_wait
from worker.waits.state import WaitContext, WaitState


def _settings(ws: Path, **overrides: object) -> Settings:
    return load_settings(ws, **overrides)


def _event(settings: Settings, run_id: int | None) -> dict:  # type: ignore[type-arg]
    with Store(settings.db_path) as store:
        event = store.decision_for_run(run_id or 0)
    assert event is not None
    return event


def _wait(settings: Settings, task_id: str) -> Path:
    state = WaitState.model_validate(
        {
            "taskId": task_id,
            "timestamp": datetime.now(UTC) - timedelta(hours=1),
            "resumeWhen": "user_approval",
            "reason": "needs a yes",
            "waitFor": "approval",
            "context": WaitContext(mode="code-simple", model="sonnet", iteration=2),
            "source": "inbox",
            "taskTitle": f"task {task_id}",
        }
    )
    return save_wait(settings, state)


def test_cancel_drops_a_queued_task_and_tells_its_sender(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    write_message(workspace, "m1")
    write_message(workspace, "m2", created_at="2026-11-20T11:00:00Z")
    settings = _settings(workspace)
    write_order(settings, "m1", Order.CANCEL, "duplicate")
    report = run_once(settings, RunOptions())
    assert (report.task_id, report.outcome) == ("m2", Outcome.SUCCESS)
    assert {"SAFETY_OVERRIDE", "QUEUED_DROPPED"} <= set(report.reason_codes)
    inbox = workspace / "inbox"
    assert json.loads((inbox / "done" / "m1.json").read_text())["status"] == "read"
    reply = json.loads((inbox / "outbox" / "m1-cancelled-reply.json").read_text())
    assert "cancelled: cancel by cli: duplicate" in reply["body"]
    assert not list(control_dir(settings).glob("*.json"))
    kernel = _event(settings, report.run_id)["detail"]["kernel"]
    assert {
        "act": "drop_queued",
        "task": "m1",
        "ok": True,
        "outcome": "dropped; source told",
    } in kernel["applied"]
    assert len(fake_claude.calls) == 1  # only m2 ran


def test_cancel_a_waiting_task(workspace: Path) -> None:
    write_message(workspace, "w1", status="read")
    (workspace / "inbox" / "done").mkdir()
    (workspace / "inbox" / "w1.json").rename(workspace / "inbox" / "done" / "w1.json")
    settings = _settings(workspace)
    path = _wait(settings, "w1")
    write_order(settings, "w1", Order.CANCEL, "not needed")
    report = run_once(settings, RunOptions())
    assert report.outcome is Outcome.IDLE and "WAIT_CANCELLED" in report.reason_codes
    assert not path.exists()
    assert (settings.wait_states / "cancelled" / path.name).exists()  # kept, not deleted
    reply = json.loads((workspace / "inbox" / "outbox" / "w1-cancelled-reply.json").read_text())
    assert reply["to"] == "alice"


def test_pause_then_resume(workspace: Path, fake_claude: FakeAgent) -> None:
    write_message(workspace, "m1")
    settings = _settings(workspace)
    write_order(settings, "m1", Order.PAUSE)
    first = run_once(settings, RunOptions())
    assert first.outcome is Outcome.IDLE and "PAUSED_ON_ORDER" in first.reason_codes
    second = run_once(settings, RunOptions())
    assert second.outcome is Outcome.IDLE and "TASK_PAUSED" in second.reason_codes
    write_order(settings, "m1", Order.RESUME)
    third = run_once(settings, RunOptions())
    assert (third.task_id, third.outcome) == ("m1", Outcome.SUCCESS)
    assert "RESUMED_ON_ORDER" in third.reason_codes


def test_inbox_control_message(workspace: Path, fake_claude: FakeAgent) -> None:
    """A control message in the inbox is obeyed and consumed, never run as a task."""
    write_message(workspace, "m1")
    write_message(workspace, "ctl-1", subject="CANCEL m1", body="wrong ticket")
    report = run_once(_settings(workspace), RunOptions())
    assert report.outcome is Outcome.IDLE, report
    assert "QUEUED_DROPPED" in report.reason_codes
    assert report.candidates["inbox"] == 1  # the order itself is never a candidate
    assert (workspace / "inbox" / "done" / "ctl-1.json").exists()
    assert not fake_claude.calls


def test_resume_from_someone_not_an_approver_is_refused(workspace: Path) -> None:
    settings = _settings(workspace, waits={"approvers": ["carol"]})
    _wait(settings, "w1")
    write_message(workspace, "ctl-2", kind="control", action="resume", task="w1")
    report = run_once(settings, RunOptions())
    assert report.outcome is Outcome.IDLE and "CONTROL_UNTRUSTED" in report.reason_codes


def test_unclear_reply_asks_once(workspace: Path) -> None:
    settings = _settings(workspace)
    _wait(settings, "w1")
    write_message(workspace, "r1", **{"from": "bob"}, in_reply_to="w1", body="should we stop?")
    first = run_once(settings, RunOptions())
    assert "CLARIFICATION_ASKED" in first.reason_codes
    ask = json.loads((workspace / "inbox" / "outbox" / "r1-clarify.json").read_text())
    assert ask["to"] == "bob" and ask["in_reply_to"] == "w1"
    second = run_once(settings, RunOptions())
    assert "CLARIFICATION_ASKED" not in second.reason_codes


def test_clear_stop_reply_cancels_the_wait(workspace: Path) -> None:
    settings = _settings(workspace)
    path = _wait(settings, "w1")
    write_message(workspace, "r1", **{"from": "bob"}, in_reply_to="w1", body="Stop, wrong repo")
    report = run_once(settings, RunOptions())
    assert {"REPLY_INTERPRETED", "WAIT_CANCELLED"} <= set(report.reason_codes)
    assert not path.exists()


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def test_stale_worktree_is_committed_to_its_branch(workspace: Path) -> None:
    """A worktree left by a dead run: its uncommitted work goes to its branch, never lost."""
    from worker.process.workspace_git import create_worktree

    _git(workspace, "init", "-q", "-b", "main")
    (workspace / "README").write_text("x\n")
    _git(workspace, "add", "README")
    _git(workspace, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    settings = _settings(workspace)
    path, branch = create_worktree(workspace, settings.state / "worktrees", "m9")
    (path / "work.txt").write_text("half done\n")
    report = run_once(settings, RunOptions())
    assert "STALE_CLEANUP" in report.reason_codes
    assert not path.exists()
    assert "work.txt" in _git(workspace, "show", "--stat", branch)


def test_watcher_stops_and_settles(workspace: Path) -> None:
    settings = _settings(workspace)
    task = Task("t1", "inbox", "T")
    stop = threading.Event()
    watcher = StopWatcher(settings, task, stop)
    assert not watcher.check()
    write_order(settings, "t1", Order.CANCEL, "enough")
    assert watcher.check() and stop.is_set()
    done = watcher.settle(TaskResult(task, Outcome.SUCCESS), "code-simple")
    assert done.outcome is Outcome.SUCCESS  # ended on its own first: the order waits
    assert list(control_dir(settings).glob("*.json"))
    stopped = watcher.settle(TaskResult(task, Outcome.STOPPED), "code-simple")
    assert stopped.outcome is Outcome.CANCELLED and "CANCELLED_ON_STOP" in stopped.reason_codes
    assert not list(control_dir(settings).glob("*.json"))


def test_watcher_pause_saves_a_wait_state(workspace: Path) -> None:
    settings = _settings(workspace)
    task = Task("t2", "inbox", "T")
    watcher = StopWatcher(settings, task, threading.Event())
    write_order(settings, "t2", Order.PAUSE)
    assert watcher.check()
    paused = watcher.settle(TaskResult(task, Outcome.STOPPED, session_id="s-1"), "code-simple")
    assert paused.outcome is Outcome.WAITING and paused.wait_state is not None
    state = json.loads(paused.wait_state.read_text())
    assert state["sessionId"] == "s-1" and state["resumeBrief"]


def test_why_explains_a_recorded_run(workspace: Path, fake_claude: FakeAgent, cli) -> None:  # type: ignore[no-untyped-def]
    write_message(workspace, "m1")
    report = run_once(_settings(workspace), RunOptions())
    text = cli.invoke(app, ["why", str(report.run_id), "--workspace", str(workspace)])
    assert text.exit_code == 0, text.output
    assert "took m1 from inbox in mode" in text.stdout
    assert "a foreground flow" in text.stdout and "(FOREGROUND_TASK)" in text.stdout
    assert "The run ended success" in text.stdout
    as_json = cli.invoke(app, ["why", "--json", "--workspace", str(workspace)])
    data = json.loads(as_json.stdout)
    assert data["run_id"] == report.run_id and data["decision"]["task_id"] == "m1"
    missing = cli.invoke(app, ["why", "99", "--workspace", str(workspace)])
    assert isinstance(missing.exception, UsageError)  # main() prints it and exits 2
    assert "run 99 has no decision event" in str(missing.exception)


def test_why_without_runs(workspace: Path, cli) -> None:  # type: ignore[no-untyped-def]
    result = cli.invoke(app, ["why", "--workspace", str(workspace)])
    assert isinstance(result.exception, UsageError) and "no runs yet" in str(result.exception)


def test_cancel_command_writes_an_order(workspace: Path, cli) -> None:  # type: ignore[no-untyped-def]
    write_message(workspace, "m1")
    result = cli.invoke(
        app,
        ["cancel", "m1", "--pause", "--reason", "later", "--json", "--workspace", str(workspace)],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    order = json.loads(Path(data["file"]).read_text())
    assert (order["action"], order["task"], order["reason"]) == ("pause", "m1", "later")
    both = cli.invoke(app, ["cancel", "m1", "--pause", "--resume", "--workspace", str(workspace)])
    assert isinstance(both.exception, UsageError)


def test_a_rejecting_reply_from_someone_not_an_approver_cancels_nothing(workspace: Path) -> None:
    """With approvers listed, only they may reject a wait: a "no" from bob is not a cancel."""
    settings = _settings(workspace, waits={"approvers": ["carol"]})
    path = _wait(settings, "w1")
    write_message(workspace, "r1", **{"from": "bob"}, in_reply_to="w1", body="No, rejected.")
    report = run_once(settings, RunOptions())
    assert "WAIT_CANCELLED" not in report.reason_codes
    assert path.exists()


def test_a_stop_or_pause_message_from_someone_not_an_approver_is_refused(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """With approvers listed, a pause from anyone else must not lock a task away (only an
    approver could resume it), nor may a stop from anyone else cancel it."""
    settings = _settings(workspace, waits={"approvers": ["carol"]})
    write_message(workspace, "m1")
    write_message(workspace, "ctl-1", **{"from": "mallory"}, subject="PAUSE m1")
    write_message(workspace, "ctl-2", **{"from": "mallory"}, subject="STOP *")
    report = run_once(settings, RunOptions())
    assert (report.task_id, report.outcome) == ("m1", Outcome.SUCCESS), report
    assert "CONTROL_UNTRUSTED" in report.reason_codes


def test_a_stop_message_from_an_approver_is_obeyed(workspace: Path, fake_claude: FakeAgent) -> None:
    settings = _settings(workspace, waits={"approvers": ["carol"]})
    write_message(workspace, "m1")
    write_message(workspace, "ctl-1", **{"from": "carol"}, subject="CANCEL m1")
    report = run_once(settings, RunOptions())
    assert report.outcome is Outcome.IDLE and "QUEUED_DROPPED" in report.reason_codes
