"""`worker submit` writes messages a run takes; `worker queue` shows the kernel's order."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worker.cli.app import app
from worker.config import load_settings
from worker.errors import ExitCode, WorkerError
from worker.operator.queue_plan import queue
from worker.sources.inbox import InboxSource
from worker.sources.message import Message

from .conftest import FakeAgent, aged, run_worker, write_message

pytestmark = pytest.mark.usefixtures("only_the_task")


def _submit(cli: CliRunner, ws: Path, *args: str, stdin: str | None = None) -> str:
    result = cli.invoke(app, ["submit", *args, "--workspace", str(ws)], input=stdin)
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def test_submit_writes_a_valid_message_the_inbox_takes(cli: CliRunner, workspace: Path) -> None:
    msg_id = _submit(cli, workspace, "Fix the login bug", "--body", "It fails on Safari.")
    data = json.loads((workspace / "inbox" / f"{msg_id}.json").read_text())
    message = Message.model_validate(data)
    assert (message.id, message.subject, message.body) == (
        msg_id,
        "Fix the login bug",
        "It fails on Safari.",
    )
    assert message.to == "test-machine" and message.status == "unread"
    listing = InboxSource(load_settings(workspace), None, dry_run=True).list()
    assert [t.id for t in listing.tasks] == [msg_id]
    assert listing.tasks[0].title == "Fix the login bug"
    # no temporary file is left beside it
    assert sorted(p.name for p in (workspace / "inbox").iterdir()) == [f"{msg_id}.json"]


def test_submit_reads_the_body_from_stdin_and_keeps_its_options(
    cli: CliRunner, workspace: Path
) -> None:
    msg_id = _submit(
        cli,
        workspace,
        "Tidy",
        "--body",
        "-",
        "--to",
        "all",
        "--priority",
        "2",
        "--mode",
        "code-complex",
        "--reply-to",
        "msg-0",
        stdin="line one\nline two\n",
    )
    message = Message.model_validate_json((workspace / "inbox" / f"{msg_id}.json").read_bytes())
    assert message.body == "line one\nline two\n"
    assert (message.to, message.rank, message.mode, message.in_reply_to) == (
        "all",
        2,
        "code-complex",
        "msg-0",
    )


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["T", "--priority", "soon"], "--priority 'soon'"),
        (["T", "--mode", "nope"], "--mode 'nope'"),
        (["   "], "the title is empty"),
        (["T", "--to", "a\nb"], "to:"),
    ],
)
def test_submit_refuses_bad_input_with_exit_2_and_writes_nothing(
    cli: CliRunner, workspace: Path, args: list[str], named: str
) -> None:
    result = cli.invoke(app, ["submit", *args, "--workspace", str(workspace)])
    assert isinstance(result.exception, WorkerError)  # main() turns it into the exit code
    assert result.exception.exit_code == ExitCode.USAGE == 2
    assert named in str(result.exception)
    assert list((workspace / "inbox").iterdir()) == []


def test_a_submitted_task_is_run(workspace: Path, fake_claude: FakeAgent) -> None:
    """End to end through the real command: submit, then one run takes and finishes it."""
    proc = run_worker(workspace, "submit", "Write the changelog", "--body", "for 1.2")
    assert proc.returncode == 0, proc.stderr
    msg_id = proc.stdout.strip()
    run = run_worker(workspace, "run", "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["task_id"] == msg_id and report["outcome"] == "success"
    assert "Write the changelog" in fake_claude.task_calls[0]["stdin"]


def test_queue_lists_tasks_in_the_kernels_order_with_why(workspace: Path) -> None:
    write_message(workspace, "msg-low", priority="low", subject="later")
    write_message(workspace, "msg-urgent", priority="urgent", subject="first")
    write_message(workspace, "msg-mid", subject="between")
    write_message(workspace, "msg-reply", in_reply_to="msg-x", subject="an answer")
    rows = queue(load_settings(workspace))
    in_line = [(r.position, r.task_id) for r in rows if r.position is not None]
    assert in_line == [(1, "msg-urgent"), (2, "msg-mid"), (3, "msg-low")]
    assert rows[0].why.startswith("next: an inbox message was the first task")
    assert rows[1].why == "after msg-urgent (foreground class)"
    passed = {r.task_id: r.why for r in rows if r.position is None}
    assert passed["msg-reply"].startswith("passed over: a reply to a waiting task")


def test_queue_shows_a_halt_order_holding_everything_back(workspace: Path) -> None:
    write_message(workspace, "msg-a")
    settings = load_settings(workspace)
    from worker.kernel.control import write_order
    from worker.kernel.model import Order

    write_order(settings, "*", Order.PAUSE, "maintenance window")
    rows = queue(settings)
    assert [(r.position, r.why) for r in rows if r.task_id == "msg-a"] == [
        (None, "held back: an order for every task holds new work back")
    ]


def test_queue_command_prints_a_table_and_json_and_moves_nothing(
    cli: CliRunner, workspace: Path
) -> None:
    write_message(workspace, "msg-1", subject="Fix it")
    (workspace / "inbox" / "broken.json").write_text('{"to": "all", "id": ')
    aged(workspace / "inbox" / "broken.json")
    before = sorted(os.listdir(workspace / "inbox"))
    text = cli.invoke(app, ["queue", "--workspace", str(workspace)])
    assert text.exit_code == 0, text.output
    assert "1\tmsg-1\tinbox\tFix it\tnext: " in text.stdout
    assert "unreadable: broken.json" in text.stdout
    as_json = cli.invoke(app, ["queue", "--json", "--workspace", str(workspace)])
    assert json.loads(as_json.stdout)["queue"][0]["task_id"] == "msg-1"
    assert sorted(os.listdir(workspace / "inbox")) == before
    empty = cli.invoke(app, ["queue", "--workspace", str(workspace / "inbox" / "nothing")])
    assert empty.exit_code != 0
